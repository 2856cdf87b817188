package fakephone

import (
	"os/exec"
	"syscall"
)

// setParentDeathSignal makes the kernel kill the adb server if the test
// binary dies without running its cleanups.
func setParentDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
