// Kubernetes control-plane commands in one process, for benchmarks/fused_controllers.py: what sharing one
// Go runtime and one copy of their common code saves against a process each, as k3s runs its control plane.
// Arguments: groups separated by "--", each a command's name and then its flags:
//
//	kube-controller-manager --kubeconfig=... -- kube-scheduler --kubeconfig=...
//
// kube-apiserver may be one of them.
package main

import (
	"fmt"
	"os"
	_ "unsafe" // for go:linkname

	"github.com/spf13/cobra"
	_ "k8s.io/apiserver/pkg/server" // for go:linkname
	"k8s.io/component-base/cli"
	logsapi "k8s.io/component-base/logs/api/v1"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	kcm "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	sched "k8s.io/kubernetes/cmd/kube-scheduler/app"
)

// kube-apiserver and kube-scheduler each set up the process's signal handler, which the apiserver library
// allows once per process (a second call panics). The first command's call is undone before the next
// runs, so both may. Reaching this variable needs the linker flag -checklinkname=0.
//
//go:linkname onlyOneSignalHandler k8s.io/apiserver/pkg/server.onlyOneSignalHandler
var onlyOneSignalHandler chan struct{}

func command(name string) *cobra.Command {
	switch name {
	case "kube-apiserver":
		cmd := apiserver.NewAPIServerCommand() // sets the signal handler up already
		onlyOneSignalHandler = make(chan struct{})
		return cmd
	case "kube-controller-manager":
		return kcm.NewControllerManagerCommand()
	case "kube-scheduler":
		return sched.NewSchedulerCommand()
	}
	fmt.Fprintf(os.Stderr, "unknown command %q: kube-apiserver, kube-controller-manager or kube-scheduler\n", name)
	os.Exit(2)
	return nil
}

func main() {
	// Each command applies its logging configuration; in one process the later ones must be allowed to.
	logsapi.ReapplyHandling = logsapi.ReapplyHandlingIgnoreUnchanged
	groups := [][]string{{}}
	for _, arg := range os.Args[1:] {
		if arg == "--" {
			groups = append(groups, []string{})
		} else {
			groups[len(groups)-1] = append(groups[len(groups)-1], arg)
		}
	}
	exited := make(chan int)
	for _, group := range groups {
		if len(group) == 0 {
			fmt.Fprintln(os.Stderr, "an empty group: each starts with a command's name")
			os.Exit(2)
		}
		cmd := command(group[0])
		cmd.SetArgs(group[1:])
		go func() { exited <- cli.Run(cmd) }()
	}
	os.Exit(<-exited) // the first to stop stops them all
}
