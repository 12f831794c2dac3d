// Command machine-controller-manager runs upstream's MachineSet/MachineDeployment manager
// (cmd/machine-controller-manager/app.Run of the release in ../go.mod) as upstream's own main does
// (cmd/machine-controller-manager/controller_manager.go): the same flags, defaults, metrics and
// logging. mcm's interop tests and benchmarks/manager.py run it beside mcm's manager. Built by
// hack/upstream-mcm.sh.
package main

import (
	"fmt"
	"os"

	"github.com/gardener/machine-controller-manager/cmd/machine-controller-manager/app"
	"github.com/gardener/machine-controller-manager/cmd/machine-controller-manager/app/options"
	_ "github.com/gardener/machine-controller-manager/pkg/util/client/metrics/prometheus"
	_ "github.com/gardener/machine-controller-manager/pkg/util/reflector/prometheus"
	_ "github.com/gardener/machine-controller-manager/pkg/util/workqueue/prometheus"
	"github.com/spf13/pflag"
	"k8s.io/component-base/cli/flag"
	"k8s.io/component-base/logs"
)

func main() {
	s := options.NewMCMServer()
	s.AddFlags(pflag.CommandLine)
	flag.InitFlags()
	logs.InitLogs()
	defer logs.FlushLogs()
	if err := app.Run(s); err != nil {
		fmt.Fprintf(os.Stderr, "%v\n", err)
		os.Exit(1)
	}
}
