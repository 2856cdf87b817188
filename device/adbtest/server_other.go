//go:build !linux

package adbtest

import "os/exec"

func setParentDeathSignal(*exec.Cmd) {}
