package fakephone

import (
	"encoding/base64"
	"fmt"
	"image/color"
	"io"
	"strings"
	"time"
)

// DefaultAndroid is the Android version a fake device runs unless told:
// 14 (API 34), the level the sim's dataset records.
const DefaultAndroid = 14

// MinAndroid and MaxAndroid bound the versions whose output is modelled.
const (
	MinAndroid = 10
	MaxAndroid = 16
)

// SDKLevel is ro.build.version.sdk for an Android release: 10 -> 29,
// 11 -> 30, 12 -> 31, then 13 -> 33 ... 16 -> 36 (12L took 32).
func SDKLevel(android int) int {
	if android <= 12 {
		return android + 19
	}
	return android + 20
}

// rotationDegrees are the rotations as Android names them.
var rotationDegrees = [4]int{0, 90, 180, 270}

// writeDumpsysInput prints the parts of `dumpsys input` that carry the
// rotation, in the format of the device's Android version: each touch
// device's mapper with its viewport (the native DisplayViewport::toString
// line), then SurfaceOrientation (10-13, after PhysicalWidth),
// InputDeviceOrientation as a number (14) or as RotationNN (15+). With
// InactiveDisplay the switched-off panel's touchscreen comes first: it has
// no viewport, so its mapper is disabled (PhysicalWidth -1px up to 13) and
// its rotation is a stale 0.
func (d *Device) writeDumpsysInput(w io.Writer) {
	fmt.Fprint(w, `INPUT MANAGER (dumpsys input)

Input Manager Service (Java) State:
  Interactive: true

Input Reader State (Nums of external devices: 0):
`)
	if d.opts.InactiveDisplay {
		d.writeTouchDevice(w, 3, "inner_touchscreen", false)
	}
	d.writeTouchDevice(w, 2, "fake_touchscreen", true)
	fmt.Fprint(w, "\nInput Dispatcher State:\n  DispatchEnabled: true\n")
}

// writeTouchDevice prints one touchscreen of `dumpsys input`; a touchscreen
// without a display (enabled false) has the default viewport and a
// disabled mapper.
func (d *Device) writeTouchDevice(w io.Writer, id int, name string, enabled bool) {
	o := d.opts.Orientation % 4
	pw, ph := d.physicalSize()
	lw, lh := d.phone.Size() // as rotated: the physical size turned by o
	mode, viewport := "DIRECT", fmt.Sprintf("Viewport INTERNAL: displayId=0, uniqueId=local:%s, port=0, orientation=%d, logicalFrame=[0, 0, %d, %d], physicalFrame=[0, 0, %d, %d], deviceSize=[%d, %d], isActive=[1]", activeDisplayID, o, lw, lh, lw, lh, pw, ph)
	if !enabled {
		o, lw, lh = 0, -1, -1
		mode, viewport = "DISABLED", "Viewport INTERNAL: displayId=-1, uniqueId=, port=<none>, orientation=0, logicalFrame=[0, 0, 0, 0], physicalFrame=[0, 0, 0, 0], deviceSize=[0, 0], isActive=[0]"
	}
	v := d.android()
	if v <= 11 {
		mode = strings.ToLower(mode) // modeToString before DeviceMode became an enum class
	}
	fmt.Fprintf(w, `  Device %d: %s
    EventHub Devices: [ %d ]
    Generation: 12
    IsExternal: false
    Sources: TOUCHSCREEN
    KeyboardType: 0
    Touch Input Mapper (mode - %s):
      Parameters:
        GestureMode: MULTI_TOUCH
        DeviceType: TOUCH_SCREEN
        AssociatedDisplay: hasAssociatedDisplay=true, isExternal=false, displayId=''
        OrientationAware: true
        Orientation: 0
      %s
`, id, name, id, mode, viewport)
	switch {
	case v <= 13:
		fmt.Fprintf(w, "      SurfaceWidth: %dpx\n      SurfaceHeight: %dpx\n      PhysicalWidth: %dpx\n      PhysicalHeight: %dpx\n      SurfaceOrientation: %d\n", lw, lh, lw, lh, o)
	case v == 14:
		fmt.Fprintf(w, "      DisplayBounds: %dx%d\n      InputDeviceOrientation: %d\n", max(lw, 0), max(lh, 0), o)
	default:
		fmt.Fprintf(w, "      DisplayBounds: %dx%d\n      InputDeviceOrientation: Rotation%d\n", max(lw, 0), max(lh, 0), rotationDegrees[o])
	}
}

// writeDumpsysWindowDisplays prints the rotation lines of
// `dumpsys window displays`: DisplayContent's mRotation on 10-12,
// DisplayRotation's mCurrentRotation=ROTATION_n from 13 on.
func (d *Device) writeDumpsysWindowDisplays(w io.Writer) {
	o := d.opts.Orientation % 4
	pw, ph := d.physicalSize()
	fmt.Fprintf(w, "WINDOW MANAGER DISPLAY CONTENTS (dumpsys window displays)\n  Display: mDisplayId=0 rootTasks=1\n    init=%dx%d 420dpi cur=%dx%d\n", pw, ph, pw, ph)
	if d.android() <= 12 {
		fmt.Fprintf(w, "    mRotation=%d mAltOrientation=false\n    mLastOrientation=-1\n", o)
		return
	}
	fmt.Fprintf(w, "    mLastOrientation=-1\n  DisplayRotation\n    mCurrentAppOrientation=SCREEN_ORIENTATION_UNSPECIFIED\n    mRotation=%d mDeferredRotationPauseCount=0\n    mCurrentRotation=ROTATION_%d\n", o, rotationDegrees[o])
}

// writeDumpsysDisplay prints the DisplayViewport lines of `dumpsys display`.
func (d *Device) writeDumpsysDisplay(w io.Writer) {
	o := d.opts.Orientation % 4
	pw, ph := d.physicalSize()
	lw, lh := d.phone.Size() // as rotated: the physical size turned by o
	fmt.Fprintf(w, `DISPLAY MANAGER (dumpsys display)
  mOnlyCode=false
  mViewports=[DisplayViewport{type=INTERNAL, valid=true, isActive=true, displayId=0, uniqueId='local:%s', physicalPort=0, orientation=%d, logicalFrame=Rect(0, 0 - %d, %d), physicalFrame=Rect(0, 0 - %d, %d), deviceWidth=%d, deviceHeight=%d}]

Display Devices: size=%d
`, activeDisplayID, o, lw, lh, lw, lh, pw, ph, len(d.displays()))
	for _, id := range d.displays() {
		state := "ON"
		if id == inactiveDisplayID {
			state = "OFF"
		}
		fmt.Fprintf(w, "  DisplayDeviceInfo{\"Built-in Screen\": uniqueId=\"local:%s\", %d x %d, modeId 1, defaultModeId 1, density 420, type INTERNAL, address {port=0}, state %s, FLAG_DEFAULT_DISPLAY}\n", id, pw, ph, state)
	}
}

// android is the modelled Android version.
func (d *Device) android() int { return d.opts.Android }

// props is what getprop prints, consistent with the Android version.
func (d *Device) props() map[string]string {
	v := d.android()
	return map[string]string{
		"ro.product.model":         d.opts.Model,
		"ro.product.name":          d.opts.Product,
		"ro.product.device":        d.opts.DeviceName,
		"ro.product.manufacturer":  d.opts.Manufacturer,
		"ro.build.version.sdk":     fmt.Sprint(SDKLevel(v)),
		"ro.build.version.release": fmt.Sprint(v),
		"ro.build.type":            "user",
		"ro.serialno":              d.opts.DeviceName,
	}
}

// nonASCIIInputFailure is what `input text` prints for a character outside
// the virtual keyboard map: KeyCharacterMap.getEvents returns null and
// `input` dies on it. Android 10 runs `input` as its own app_process; 11+
// run it in system_server through `cmd input`, whose shell command catches
// the exception and exits 255.
func (d *Device) nonASCIIInputFailure(w io.Writer) int {
	if d.android() <= 10 {
		fmt.Fprint(w, "Exception in thread \"main\" java.lang.NullPointerException: Attempt to get length of null array\n"+
			"\tat com.android.commands.input.Input.sendText(Input.java:168)\n"+
			"\tat com.android.commands.input.Input.run(Input.java:102)\n"+
			"\tat com.android.internal.os.RuntimeInit.main(RuntimeInit.java:338)\n")
		return 1
	}
	fmt.Fprint(w, "\nException occurred while executing 'text':\n"+
		"java.lang.NullPointerException: Attempt to get length of null array\n"+
		"\tat com.android.server.input.InputShellCommand.sendText(InputShellCommand.java:341)\n"+
		"\tat com.android.server.input.InputShellCommand.runText(InputShellCommand.java:316)\n"+
		"\tat com.android.modules.utils.BasicShellCommandHandler.exec(BasicShellCommandHandler.java:97)\n")
	return 255
}

// injectDenied is what Xiaomi/Redmi/POCO phones print for any `input`
// while "USB debugging (Security settings)" is off.
func (d *Device) injectDenied(w io.Writer) int {
	fmt.Fprint(w, "java.lang.SecurityException: Injecting input events requires the caller (or the source of the instrumentation, if any) to have the INJECT_EVENTS permission.\n"+
		"\tat android.os.Parcel.createExceptionOrNull(Parcel.java:3011)\n"+
		"\tat android.os.Parcel.createException(Parcel.java:2995)\n"+
		"\tat android.hardware.input.InputManager.injectInputEvent(InputManager.java:1079)\n"+
		"\tat com.android.server.input.InputShellCommand.injectKeyEvent(InputShellCommand.java:210)\n")
	if d.android() <= 10 {
		return 1
	}
	return 255
}

// virtualKeyboardTypes reports whether `input text` can type every
// character of s: the virtual keyboard map holds ASCII only.
func virtualKeyboardTypes(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// runIME serves `ime list|enable|set` for the IMEs the device has.
func (d *Device) runIME(args []string, w io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(w, "ime <command>:\n  list [-a] [-s]\n  enable ID\n  set ID")
		return 0
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	switch args[0] {
	case "list":
		for _, id := range d.imes {
			if d.enabledIME[id] || contains(args[1:], "-a") {
				fmt.Fprintln(w, id)
			}
		}
		return 0
	case "enable", "set":
		if len(args) != 2 {
			fmt.Fprintln(w, "Error: ime "+args[0]+" needs an IME id")
			return 255
		}
		id := args[1]
		if !contains(d.imes, id) {
			fmt.Fprintf(w, "Unknown input method %s cannot be %s for user #0\n", id, map[string]string{"enable": "enabled", "set": "selected"}[args[0]])
			return 255
		}
		if args[0] == "enable" {
			fmt.Fprintf(w, "Input method %s: %s\n", id, map[bool]string{true: "already enabled", false: "now enabled"}[d.enabledIME[id]])
			d.enabledIME[id] = true
			return 0
		}
		if !d.enabledIME[id] {
			fmt.Fprintf(w, "Unknown input method %s cannot be selected for user #0\n", id)
			return 255
		}
		d.pendingIME, d.pendingAt = id, time.Now().Add(d.opts.IMESwitchDelay)
		fmt.Fprintf(w, "Input method %s selected for user #0\n", id)
		return 0
	}
	fmt.Fprintf(w, "Unknown command: %s\n", args[0])
	return 255
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// CurrentIME is the input method in charge: the one `ime set` selected,
// once IMESwitchDelay has passed.
func (d *Device) CurrentIME() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.currentIMELocked()
}

func (d *Device) currentIMELocked() string {
	if d.pendingIME != "" && !time.Now().Before(d.pendingAt) {
		d.currentIME, d.pendingIME = d.pendingIME, ""
	}
	return d.currentIME
}

// runSettings serves `settings get secure default_input_method`.
func (d *Device) runSettings(args []string, w io.Writer) int {
	if len(args) == 3 && args[0] == "get" && args[2] == "default_input_method" {
		fmt.Fprintln(w, d.CurrentIME())
		return 0
	}
	if len(args) >= 3 && args[0] == "get" {
		fmt.Fprintln(w, "null")
		return 0
	}
	fmt.Fprintln(w, "usage: settings [--user <USER_ID> | current] get namespace key")
	return 255
}

// runAm serves `am broadcast -a ADB_INPUT_B64 --es msg B64` (and the plain
// ADB_INPUT_TEXT): the ADBKeyboard IME receives it only while selected.
func (d *Device) runAm(args []string, w io.Writer) int {
	if len(args) == 0 || args[0] != "broadcast" {
		fmt.Fprintln(w, "Error: the fake device's am only broadcasts")
		return 255
	}
	var act, msg string
	for i := 1; i+1 < len(args); i++ {
		switch args[i] {
		case "-a":
			act = args[i+1]
			i++
		case "--es":
			if i+2 < len(args) && args[i+1] == "msg" {
				msg = args[i+2]
				i += 2
			}
		}
	}
	fmt.Fprintf(w, "Broadcasting: Intent { act=%s flg=0x400000 (has extras) }\n", act)
	if d.CurrentIME() == adbKeyboardIME && (act == "ADB_INPUT_B64" || act == "ADB_INPUT_TEXT") {
		text := msg
		if act == "ADB_INPUT_B64" {
			b, err := base64.StdEncoding.DecodeString(msg)
			if err != nil {
				fmt.Fprintln(w, "Broadcast completed: result=0")
				return 0 // the IME logs the bad payload and types nothing
			}
			text = string(b)
		}
		d.phone.Text(text)
	}
	fmt.Fprintln(w, "Broadcast completed: result=0")
	return 0
}

// adbKeyboardIME and latinIME are the IMEs the fake device may hold.
const (
	adbKeyboardIME = "com.android.adbkeyboard/.AdbIME"
	latinIME       = "com.google.android.inputmethod.latin/com.android.inputmethod.latin.LatinIME"
)

func (d *Device) initIMEs() {
	d.imes = []string{latinIME}
	d.enabledIME = map[string]bool{latinIME: true}
	d.currentIME = latinIME
	if d.opts.ADBKeyboard {
		d.imes = append(d.imes, adbKeyboardIME)
	}
}

// Physical display ids as SurfaceFlinger prints them: the phone's panel,
// and (InactiveDisplay) a switched-off one listed before it.
const (
	inactiveDisplayID = "4619827259835644672"
	activeDisplayID   = "4619827259835644673"
)

// displays lists the physical display ids in SurfaceFlinger's order.
func (d *Device) displays() []string {
	if d.opts.InactiveDisplay {
		return []string{inactiveDisplayID, activeDisplayID}
	}
	return []string{activeDisplayID}
}

// writeDisplayIDs prints `dumpsys SurfaceFlinger --display-id`.
func (d *Device) writeDisplayIDs(w io.Writer) {
	for i, id := range d.displays() {
		fmt.Fprintf(w, "Display %s (HWC display %d): port=%d pnpId=GGL displayName=\"EMU_display_%d\"\n", id, i, i, i)
	}
}

// screencapDisplay is the PNG `screencap -d display` writes, and the
// warning printed before it when several displays exist and none is named.
func (d *Device) screencapDisplay(display string) (png []byte, warning string, err error) {
	switch {
	case display == "" && d.opts.InactiveDisplay:
		w, h := d.phone.Size()
		return SolidPNG(w, h, color.RGBA{0, 0, 0, 255}), "[Warning] Multiple displays were found, but no display id was specified! Defaulting to the first display found, however this default is not guaranteed to be consistent across captures. A display id should be specified.\n" +
			"A display ID can be specified with the [-d display-id] option.\n" +
			"See \"dumpsys SurfaceFlinger --display-id\" for valid display IDs.\n", nil
	case display == inactiveDisplayID && d.opts.InactiveDisplay:
		w, h := d.phone.Size()
		return SolidPNG(w, h, color.RGBA{0, 0, 0, 255}), "", nil
	case display != "" && display != activeDisplayID:
		return nil, "", fmt.Errorf("display %s not found", display)
	}
	img, err := d.phone.Screencap()
	return img, "", err
}
