//go:build !linux

package fakephone

import "os/exec"

func setParentDeathSignal(*exec.Cmd) {}
