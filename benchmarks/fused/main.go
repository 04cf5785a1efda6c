// kube-controller-manager and kube-scheduler in one process, for benchmarks/fused_controllers.py:
// what sharing one Go runtime and one copy of their common code saves against two processes.
// Arguments: kube-controller-manager's flags, then "--", then kube-scheduler's.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	logsapi "k8s.io/component-base/logs/api/v1"
	kcm "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	sched "k8s.io/kubernetes/cmd/kube-scheduler/app"
)

func main() {
	// Each command applies its logging configuration; in one process the second must be allowed to.
	logsapi.ReapplyHandling = logsapi.ReapplyHandlingIgnoreUnchanged
	split := len(os.Args)
	for i, arg := range os.Args {
		if arg == "--" {
			split = i
			break
		}
	}
	controllers := kcm.NewControllerManagerCommand()
	controllers.SetArgs(os.Args[1:split])
	scheduler := sched.NewSchedulerCommand()
	scheduler.SetArgs(os.Args[min(split+1, len(os.Args)):])
	go func() { os.Exit(cli.Run(scheduler)) }()
	os.Exit(cli.Run(controllers))
}
