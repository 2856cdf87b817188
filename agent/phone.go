package agent

import (
	"context"

	"github.com/autoui/autoui/action"
	"github.com/autoui/autoui/device"
)

// Phone is what an episode needs of a phone: a real one over adb
// (*device.Device is one) or a simulated one in process (sim/dataset's).
type Phone interface {
	// Serial and Model name the phone in the summary.
	Serial() string
	Model() string
	// Screenshot captures the screen.
	Screenshot(ctx context.Context) (*device.Screenshot, error)
	// ScreenSize is the coordinate space gestures are mapped to.
	ScreenSize(ctx context.Context) (width, height int, err error)
	// PlanAction maps an action into a gesture for a width x height screen
	// and what Dispatch will send for it.
	PlanAction(a action.Action, width, height int) device.Plan
	// Dispatch performs a plan.
	Dispatch(ctx context.Context, p device.Plan) error
	// UIElements reads the UI hierarchy (Options.Settle ui);
	// device.ErrUIBusy when the UI is too busy to be read.
	UIElements(ctx context.Context) ([]device.UIElement, error)
}

var _ Phone = (*device.Device)(nil)
