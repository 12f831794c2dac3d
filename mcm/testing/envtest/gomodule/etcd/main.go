// Command etcd is the etcd server, built from the go.etcd.io/etcd/server/v3 module that
// k8s.io/kubernetes is tested against.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
