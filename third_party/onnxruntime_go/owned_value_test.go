package onnxruntime_go

import (
	"testing"
	"unsafe"
)

func float32s(t *testing.T, v *OwnedValue) []float32 {
	t.Helper()
	b, e := v.HostData()
	if e != nil {
		t.Fatalf("Error reading host data: %s\n", e)
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
}

// Outputs bound to (CPU) device memory come back as OwnedValues without a
// copy, and feed the next run as inputs; an earlier output stays valid while
// referenced after the binding moves on.
func TestBindOutputToDeviceFeedback(t *testing.T) {
	InitializeRuntime(t)
	defer CleanupRuntime(t)
	session, e := NewDynamicAdvancedSession("test_data/example_accumulate.onnx",
		[]string{"x"}, []string{"y", "n"}, nil)
	if e != nil {
		t.Fatalf("Error creating session: %s\n", e)
	}
	defer session.Destroy()
	binding, e := session.CreateIoBinding()
	if e != nil {
		t.Fatalf("Error creating I/O binding: %s\n", e)
	}
	defer binding.Destroy()
	cpu, e := NewMemoryInfo("Cpu", AllocatorTypeDevice, 0, MemTypeDefault)
	if e != nil {
		t.Fatalf("Error creating memory info: %s\n", e)
	}
	defer cpu.Destroy()

	input, e := NewTensor(NewShape(3), []float32{1, 2, 3})
	if e != nil {
		t.Fatalf("Error creating input: %s\n", e)
	}
	defer input.Destroy()
	var count int64
	countTensor, e := NewTensor(NewShape(1), []int64{0})
	if e != nil {
		t.Fatalf("Error creating output: %s\n", e)
	}
	defer countTensor.Destroy()

	var first *OwnedValue
	var in Value = input
	for run := 0; run < 3; run++ {
		if e = binding.BindInput("x", in); e != nil {
			t.Fatalf("Error binding input: %s\n", e)
		}
		if e = binding.BindOutputToDevice("y", cpu); e != nil {
			t.Fatalf("Error binding output to device: %s\n", e)
		}
		if e = binding.BindOutput("n", countTensor); e != nil {
			t.Fatalf("Error binding output: %s\n", e)
		}
		if e = session.RunWithBinding(binding); e != nil {
			t.Fatalf("Error running: %s\n", e)
		}
		outs, e := binding.GetBoundOutputOwnedValues()
		if e != nil {
			t.Fatalf("Error getting owned outputs: %s\n", e)
		}
		if len(outs) != 2 {
			t.Fatalf("Got %d outputs, want 2\n", len(outs))
		}
		// The Go-backed output was written in place.
		count = countTensor.GetData()[0]
		outs[1].Destroy()
		y := outs[0]
		if y.Location() != "Cpu" || !y.GetShape().Equals(NewShape(3)) ||
			y.DataType() != input.DataType() || y.GetONNXType() != ONNXTypeTensor {
			t.Fatalf("Output in %s, shape %s, type %d\n", y.Location(),
				y.GetShape(), y.DataType())
		}
		got := float32s(t, y)
		for i, want := range []float32{1, 2, 3} {
			if got[i] != want+float32(run+1) {
				t.Fatalf("Run %d: output %v\n", run, got)
			}
		}
		if count != 3 {
			t.Fatalf("Run %d: count %d\n", run, count)
		}
		if first == nil {
			first = y
		} else if in != Value(first) {
			in.Destroy()
		}
		in = y
	}
	// The first output survived two more runs and its release by the binding.
	if got := float32s(t, first); got[0] != 2 {
		t.Fatalf("First output changed to %v\n", got)
	}
	first.ZeroContents()
	if got := float32s(t, first); got[0] != 0 || got[2] != 0 {
		t.Fatalf("ZeroContents left %v\n", got)
	}
	first.Destroy()
	first.Destroy() // twice is safe
	if _, e := first.HostData(); e == nil {
		t.Fatalf("Read a destroyed value\n")
	}
	in.Destroy()
}

// No outputs bound: an empty slice, no error.
func TestGetBoundOutputOwnedValuesNone(t *testing.T) {
	InitializeRuntime(t)
	defer CleanupRuntime(t)
	session, e := NewDynamicAdvancedSession("test_data/example_accumulate.onnx",
		[]string{"x"}, []string{"y", "n"}, nil)
	if e != nil {
		t.Fatalf("Error creating session: %s\n", e)
	}
	defer session.Destroy()
	binding, e := session.CreateIoBinding()
	if e != nil {
		t.Fatalf("Error creating I/O binding: %s\n", e)
	}
	defer binding.Destroy()
	outs, e := binding.GetBoundOutputOwnedValues()
	if e != nil || len(outs) != 0 {
		t.Fatalf("Got %d values, error %v\n", len(outs), e)
	}
}

// An ORT-owned value bound as an output is written in place, and a run with
// options (a run config entry set) works through the binding: a fixed set of
// buffers run after run, as CUDA-graph replay needs.
func TestRunWithBindingOptionsInPlace(t *testing.T) {
	InitializeRuntime(t)
	defer CleanupRuntime(t)
	session, e := NewDynamicAdvancedSession("test_data/example_accumulate.onnx",
		[]string{"x"}, []string{"y", "n"}, nil)
	if e != nil {
		t.Fatalf("Error creating session: %s\n", e)
	}
	defer session.Destroy()
	binding, e := session.CreateIoBinding()
	if e != nil {
		t.Fatalf("Error creating I/O binding: %s\n", e)
	}
	defer binding.Destroy()
	cpu, e := NewMemoryInfo("Cpu", AllocatorTypeDevice, 0, MemTypeDefault)
	if e != nil {
		t.Fatalf("Error creating memory info: %s\n", e)
	}
	defer cpu.Destroy()
	opts, e := NewRunOptions()
	if e != nil {
		t.Fatalf("Error creating run options: %s\n", e)
	}
	defer opts.Destroy()
	if e = opts.AddRunConfigEntry("gpu_graph_id", "-1"); e != nil {
		t.Fatalf("Error adding a run config entry: %s\n", e)
	}
	input, e := NewTensor(NewShape(3), []float32{1, 2, 3})
	if e != nil {
		t.Fatalf("Error creating input: %s\n", e)
	}
	defer input.Destroy()
	if e = binding.BindInput("x", input); e != nil {
		t.Fatalf("Error binding input: %s\n", e)
	}
	if e = binding.BindOutputToDevice("y", cpu); e != nil {
		t.Fatalf("Error binding output to device: %s\n", e)
	}
	if e = session.RunWithBindingOptions(binding, nil); e != nil {
		t.Fatalf("Error running: %s\n", e)
	}
	outs, e := binding.GetBoundOutputOwnedValues()
	if e != nil || len(outs) != 1 {
		t.Fatalf("Got %d owned outputs, error %v\n", len(outs), e)
	}
	y := outs[0]
	defer y.Destroy()
	before, _ := y.HostData()
	binding.ClearBoundOutputs()
	if e = binding.BindOutput("y", y); e != nil {
		t.Fatalf("Error binding an owned value as output: %s\n", e)
	}
	copy(input.GetData(), []float32{10, 20, 30})
	for run := 0; run < 2; run++ {
		if e = session.RunWithBindingOptions(binding, opts); e != nil {
			t.Fatalf("Error running with options: %s\n", e)
		}
		got := float32s(t, y)
		for i, want := range []float32{11, 21, 31} {
			if got[i] != want {
				t.Fatalf("Run %d: output %v, want it written in place\n", run, got)
			}
		}
	}
	after, _ := y.HostData()
	if &before[0] != &after[0] {
		t.Fatalf("The bound output moved\n")
	}
}
