package device

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// hinted is an error whose one-line message says what went wrong and how
// to fix it, while errors.Is/As still reach the cause.
type hinted struct {
	msg string
	err error
}

func (e *hinted) Error() string { return e.msg }
func (e *hinted) Unwrap() error { return e.err }

// isNetworkSerial tells a device reached over TCP (`adb connect`, wireless
// debugging) from a USB one: their offline fixes differ.
func isNetworkSerial(serial string) bool {
	if strings.Contains(serial, "._adb-tls-connect._tcp") {
		return true
	}
	i := strings.LastIndexByte(serial, ':')
	return i > 0 && i < len(serial)-1 && strings.Trim(serial[i+1:], "0123456789") == ""
}

// stateHint says how to bring a device in this `adb devices` state online.
func stateHint(serial, state string) string {
	switch state {
	case "unauthorized":
		return "unlock the phone and accept the \"Allow USB debugging?\" prompt (tick \"Always allow\"); if none shows, revoke USB debugging authorizations in Developer options and reconnect"
	case "offline":
		return offlineHint(serial)
	case "no permissions":
		return "fix the USB permissions (udev rules) for adb, e.g. `sudo apt-get install android-sdk-platform-tools-common`, then replug"
	case "authorizing", "connecting":
		return "wait a moment and try again; `adb devices` must show it as \"device\""
	}
	return "wait until `adb devices` shows it as \"device\""
}

func offlineHint(serial string) string {
	if isNetworkSerial(serial) {
		return fmt.Sprintf("the network link is down: check the phone is on the same network with wireless debugging on, then `adb disconnect %s` and `adb connect %s` again", serial, serial)
	}
	return "reconnect the USB cable (or run `adb reconnect`) and unlock the phone"
}

// wrap gives a device error one line with the fix, keeping the cause.
func (d *Device) wrap(what string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("device %s: %s: %w", d.serial, what, err)
	}
	var te *timeoutError
	if errors.As(err, &te) {
		return &hinted{fmt.Sprintf("device %s: %s gave no answer within %s (the device may be hung or the link stalled; unlock it, check `adb devices`, or raise the command timeout)", d.serial, what, te.limit), err}
	}
	var se *serverError
	if errors.As(err, &se) {
		return &hinted{fmt.Sprintf("device %s: %s: %s", d.serial, what, serverHint(d.serial, se.msg)), err}
	}
	return &hinted{fmt.Sprintf("device %s: %s: %s", d.serial, what, oneLine(err.Error())), err}
}

// serverHint turns an adb server FAIL message into its cause and fix.
func serverHint(serial, msg string) string {
	m := strings.ToLower(msg)
	switch {
	case strings.Contains(m, "unauthorized"):
		return "device unauthorized: " + stateHint(serial, "unauthorized")
	case strings.Contains(m, "offline"):
		return "device offline: " + offlineHint(serial)
	case strings.Contains(m, "not found"):
		return "device disconnected: " + offlineHint(serial)
	case strings.Contains(m, "more than one"):
		return "several devices attached: choose one with --serial or ANDROID_SERIAL"
	case strings.Contains(m, "no permissions"):
		return stateHint(serial, "no permissions")
	}
	return oneLine(msg)
}

// oneLine keeps the first non-empty line of s (adb and Java messages run
// over several), marking that more was cut.
func oneLine(s string) string {
	lines := strings.Split(strings.TrimSpace(strings.ReplaceAll(s, "\r", "")), "\n")
	first := strings.TrimSpace(lines[0])
	if len(lines) > 1 {
		first += " (…)"
	}
	return first
}

// reJavaException finds the exception line of a Java stack trace, e.g.
// "java.lang.SecurityException: Injecting input events requires ...".
var reJavaException = regexp.MustCompile(`(?m)^(?:Exception in thread "[^"]*" )?((?:[a-zA-Z_$][\w$]*\.)+[A-Z][\w$]*(?:Exception|Error)(?::[^\n]*)?)$`)

// commandFailure summarizes what a failed device command printed in one
// line: the Java exception when there is one (never the stack trace), else
// the first line, plus the fix for failures with a known one.
func commandFailure(out string) string {
	msg := oneLine(out)
	if m := reJavaException.FindStringSubmatch(out); m != nil {
		msg = strings.TrimSpace(m[1])
	}
	if msg == "" {
		msg = "no output"
	}
	if strings.Contains(out, "INJECT_EVENTS") {
		msg = strings.TrimSuffix(msg, ".") + "; the phone refuses injected input: on Xiaomi/Redmi/POCO (MIUI/HyperOS) enable Developer options > \"USB debugging (Security settings)\" (needs a SIM and a Mi account), then reconnect"
	}
	return msg
}
