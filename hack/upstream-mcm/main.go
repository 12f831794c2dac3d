// Command machine-controller runs upstream's machine controller (pkg/util/provider/app.Run) with
// an in-memory driver, as mcm's benchmarks/vs_upstream.py needs it: a same-run yardstick for mcm's
// own controller under the same emulators, node simulator and load. Built by hack/upstream-mcm.sh.
package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/gardener/machine-controller-manager/pkg/apis/machine/v1alpha1"
	"github.com/gardener/machine-controller-manager/pkg/util/provider/app"
	"github.com/gardener/machine-controller-manager/pkg/util/provider/app/options"
	"github.com/gardener/machine-controller-manager/pkg/util/provider/driver"
	"github.com/gardener/machine-controller-manager/pkg/util/provider/machinecodes/codes"
	"github.com/gardener/machine-controller-manager/pkg/util/provider/machinecodes/status"
	"github.com/spf13/pflag"
)

// providerIDPrefix matches mcm's FakeDriver, so the node simulator sees the same provider IDs.
const providerIDPrefix = "fake:///"

// memoryDriver is an in-memory cloud that behaves like mcm's FakeDriver with no scripts: a VM per
// machine, named after it, whose node has the machine's name.
type memoryDriver struct {
	mu  sync.Mutex
	vms map[string]string // provider ID -> machine name
}

func newMemoryDriver() *memoryDriver {
	return &memoryDriver{vms: map[string]string{}}
}

// find returns the provider ID of the machine's VM: by spec.providerID when set, else by name.
func (d *memoryDriver) find(machine *v1alpha1.Machine) (string, bool) {
	if id := machine.Spec.ProviderID; id != "" {
		_, ok := d.vms[id]
		return id, ok
	}
	for id, name := range d.vms {
		if name == machine.Name {
			return id, true
		}
	}
	return "", false
}

func (d *memoryDriver) CreateMachine(_ context.Context, req *driver.CreateMachineRequest) (*driver.CreateMachineResponse, error) {
	if req.Machine.Name == "" {
		return nil, status.Error(codes.InvalidArgument, "machine has no metadata.name")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	id, ok := d.find(req.Machine)
	if !ok {
		id = providerIDPrefix + req.Machine.Name
		d.vms[id] = req.Machine.Name
	}
	return &driver.CreateMachineResponse{ProviderID: id, NodeName: d.vms[id]}, nil
}

func (d *memoryDriver) DeleteMachine(_ context.Context, req *driver.DeleteMachineRequest) (*driver.DeleteMachineResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if id, ok := d.find(req.Machine); ok {
		delete(d.vms, id)
	}
	return &driver.DeleteMachineResponse{}, nil
}

func (d *memoryDriver) GetMachineStatus(_ context.Context, req *driver.GetMachineStatusRequest) (*driver.GetMachineStatusResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	id, ok := d.find(req.Machine)
	if !ok {
		return nil, status.Error(codes.NotFound, "Fake plugin is returning no VM instances backing this machine object")
	}
	return &driver.GetMachineStatusResponse{ProviderID: id, NodeName: d.vms[id]}, nil
}

func (d *memoryDriver) ListMachines(_ context.Context, _ *driver.ListMachinesRequest) (*driver.ListMachinesResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	list := make(map[string]string, len(d.vms))
	for id, name := range d.vms {
		list[id] = name
	}
	return &driver.ListMachinesResponse{MachineList: list}, nil
}

func (d *memoryDriver) GetVolumeIDs(_ context.Context, req *driver.GetVolumeIDsRequest) (*driver.GetVolumeIDsResponse, error) {
	ids := []string{}
	for _, spec := range req.PVSpecs {
		if spec != nil && spec.CSI != nil && spec.CSI.VolumeHandle != "" {
			ids = append(ids, spec.CSI.VolumeHandle)
		}
	}
	return &driver.GetVolumeIDsResponse{VolumeIDs: ids}, nil
}

func (d *memoryDriver) GenerateMachineClassForMigration(_ context.Context, _ *driver.GenerateMachineClassForMigrationRequest) (*driver.GenerateMachineClassForMigrationResponse, error) {
	return nil, status.Error(codes.Unimplemented, "the in-memory driver has no provider-specific machine classes")
}

func main() {
	s := options.NewMCServer()
	s.AddFlags(pflag.CommandLine)
	pflag.CommandLine.SetNormalizeFunc(func(_ *pflag.FlagSet, name string) pflag.NormalizedName {
		return pflag.NormalizedName(strings.ReplaceAll(name, "_", "-"))
	})
	pflag.Parse()
	if err := app.Run(s, newMemoryDriver()); err != nil {
		fmt.Fprintf(os.Stderr, "%v\n", err)
		os.Exit(1)
	}
}
