package aitw

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/big"
	"os"
	"strings"

	"github.com/nlpodyssey/gopickle/pickle"
	"github.com/nlpodyssey/gopickle/pytorch"
	"github.com/nlpodyssey/gopickle/types"

	"github.com/autoui/autoui/action"
)

// Auto-UI's fetch_features.py pickles a list of episodes
//
//	{"episode_id": str, "data": [{"goal", "step_id", "image", "ui_positions",
//	  "ui_text", "ui_type", "result_touch_yx", "result_lift_yx",
//	  "result_action": [NAME, text]}, ...]}
//
// where "image" is the BLIP-2 pooled feature. fetch_features.py stores it as
// a float16 torch tensor (pickled by plain pickle, so its storage is a nested
// legacy torch.save blob); re-exported files often hold numpy arrays. Both are
// read here, as are plain lists. "ui_positions" is a numpy (N, 4) array.

// ReadAutoUIPickle reads one Auto-UI feature pickle.
func ReadAutoUIPickle(path, subset string) ([]Episode, error) {
	var eps []Episode
	var st ReadStats
	err := readPickleFile(path, subset, ReadOptions{}, &st, func(e Episode) error {
		eps = append(eps, e)
		return nil
	})
	return eps, err
}

func readPickleFile(path, subset string, opts ReadOptions, st *ReadStats, fn func(Episode) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("gold data: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("gold data: %w", err)
	}
	if fi.Size() == 0 {
		return fmt.Errorf("%s: %w", path, ErrEmptyFile)
	}
	u := pickle.NewUnpickler(bufio.NewReaderSize(f, 1<<20))
	u.FindClass = findPickleClass
	obj, err := loadPickle(&u, f, 0, fi.Size())
	if err != nil {
		return fmt.Errorf("read Auto-UI pickle %s: %w", path, err)
	}
	list, ok := obj.(*types.List)
	if !ok {
		return fmt.Errorf("read Auto-UI pickle %s: top level is %T, want a list of episodes", path, obj)
	}
	// Every episode is read before the first is handed over: a pickle is
	// read whole or not at all (a bad value in its last episode would
	// otherwise stop a run after predicting the first ones).
	var eps []Episode
	for i, item := range *list {
		if opts.Stop != nil {
			if err := opts.Stop(); err != nil {
				return err
			}
		}
		ep, err := pickleEpisode(item, subset)
		if err != nil {
			return fmt.Errorf("read Auto-UI pickle %s: episode #%d: %w", path, i, err)
		}
		if opts.Keep != nil && !opts.Keep(ep.ID) {
			continue
		}
		for j := range ep.Steps {
			ep.Steps[j].Source = fmt.Sprintf("%s#%d.%d", path, i, j)
		}
		eps = append(eps, ep)
	}
	for _, ep := range eps {
		st.Records += len(ep.Steps)
		if err := fn(ep); err != nil {
			return err
		}
	}
	return nil
}

func pickleEpisode(item any, subset string) (Episode, error) {
	d, ok := item.(*types.Dict)
	if !ok {
		return Episode{}, fmt.Errorf("is %T, want a dict", item)
	}
	id, err := dictString(d, "episode_id")
	if err != nil {
		return Episode{}, err
	}
	raw, ok := d.Get("data")
	if !ok {
		return Episode{}, fmt.Errorf("episode %s: no \"data\"", id)
	}
	data, ok := raw.(*types.List)
	if !ok {
		return Episode{}, fmt.Errorf("episode %s: \"data\" is %T, want a list", id, raw)
	}
	ep := Episode{ID: id, Subset: subset}
	for j, sraw := range *data {
		s, err := pickleStep(sraw)
		if err != nil {
			return Episode{}, fmt.Errorf("episode %s step #%d: %w", id, j, err)
		}
		s.EpisodeID, s.Subset, s.EpisodeLength = id, subset, len(*data)
		if err := s.checkValues(); err != nil {
			return Episode{}, fmt.Errorf("episode %s step #%d: %w", id, j, err)
		}
		if ep.Goal == "" {
			ep.Goal = s.Goal
		}
		ep.Steps = append(ep.Steps, s)
	}
	sortSteps(&ep)
	return ep, nil
}

func pickleStep(raw any) (Step, error) {
	d, ok := raw.(*types.Dict)
	if !ok {
		return Step{}, fmt.Errorf("is %T, want a dict", raw)
	}
	var s Step
	var err error
	if s.Goal, err = dictString(d, "goal"); err != nil {
		return s, err
	}
	v, _ := d.Get("step_id")
	sid, ok := toInt(v)
	if !ok {
		return s, fmt.Errorf("step_id is %T, want an int", v)
	}
	s.StepID = sid
	if v, ok := d.Get("image"); ok && v != nil {
		if s.Features, err = toFloat32s(v); err != nil {
			return s, fmt.Errorf("image: %w", err)
		}
	}
	if v, ok := d.Get("ui_positions"); ok && v != nil {
		pos, err := toFloat32s(v)
		if err != nil {
			return s, fmt.Errorf("ui_positions: %w", err)
		}
		if len(pos)%4 != 0 {
			return s, fmt.Errorf("ui_positions has %d values, not a multiple of 4", len(pos))
		}
		s.Boxes = boxesFromFlat(pos)
	}
	if s.UIText, err = dictStrings(d, "ui_text"); err != nil {
		return s, err
	}
	if s.UITypes, err = dictStrings(d, "ui_type"); err != nil {
		return s, err
	}
	touch, err := dictPoint(d, "result_touch_yx")
	if err != nil {
		return s, err
	}
	lift, err := dictPoint(d, "result_lift_yx")
	if err != nil {
		return s, err
	}
	ra, err := dictStrings(d, "result_action")
	if err != nil || len(ra) != 2 {
		return s, fmt.Errorf("result_action: want [NAME, text] (%v)", err)
	}
	t, err := action.ParseType(ra[0])
	if err != nil {
		return s, fmt.Errorf("result_action: %w", err)
	}
	s.Action = action.Action{Type: t, Touch: touch, Lift: lift, Text: ra[1]}
	return s, nil
}

func dictString(d *types.Dict, key string) (string, error) {
	v, ok := d.Get(key)
	if !ok {
		return "", fmt.Errorf("no %q", key)
	}
	switch s := v.(type) {
	case string:
		return s, nil
	case []byte:
		return string(s), nil
	}
	return "", fmt.Errorf("%q is %T, want a string", key, v)
}

func dictStrings(d *types.Dict, key string) ([]string, error) {
	v, ok := d.Get(key)
	if !ok || v == nil {
		return nil, nil
	}
	var items []any
	switch l := v.(type) {
	case *types.List:
		items = *l
	case *types.Tuple:
		items = *l
	default:
		return nil, fmt.Errorf("%q is %T, want a list of strings", key, v)
	}
	out := make([]string, len(items))
	for i, it := range items {
		switch s := it.(type) {
		case string:
			out[i] = s
		case []byte:
			out[i] = string(s)
		default:
			return nil, fmt.Errorf("%q[%d] is %T, want a string", key, i, it)
		}
	}
	return out, nil
}

func dictPoint(d *types.Dict, key string) (action.Point, error) {
	v, ok := d.Get(key)
	if !ok {
		return action.Point{}, fmt.Errorf("no %q", key)
	}
	f, err := toFloat32s(v)
	if err != nil || len(f) != 2 {
		return action.Point{}, fmt.Errorf("%q: want [y, x] (%v)", key, err)
	}
	// AITW stores float32; widening keeps the exact value.
	return action.Point{Y: float64(f[0]), X: float64(f[1])}, nil
}

func toInt(v any) (int, bool) {
	switch n := v.(type) {
	case int:
		return n, true
	case *big.Int:
		if n.IsInt64() {
			return int(n.Int64()), true
		}
	case numpyScalar:
		return int(n.f), float64(int(n.f)) == n.f
	}
	return 0, false
}

// toFloat32s flattens a numpy array, torch tensor or (nested) list of numbers.
func toFloat32s(v any) ([]float32, error) {
	left := maxPickleNumbers
	return nestedFloat32s(v, 0, &left)
}

// Bounds on one value's numbers: features and boxes are one or two lists
// deep and a few thousand numbers, while a pickled list may hold itself, or
// hold one list K times over 8 levels: K^8 numbers from a few KB of shared
// references.
const (
	listDepth        = 8
	maxPickleNumbers = 1 << 20
)

// nestedFloat32s flattens v, taking its numbers from *left (an error past
// it).
func nestedFloat32s(v any, depth int, left *int) ([]float32, error) {
	if depth > listDepth {
		return nil, fmt.Errorf("lists nested over %d deep", listDepth)
	}
	var out []float32
	var err error
	switch x := v.(type) {
	case *ndarray:
		out, err = x.float32s()
	case *pytorch.Tensor:
		out, err = tensorFloat32s(x)
	case *types.List:
		return listFloat32s(*x, depth+1, left)
	case *types.Tuple:
		return listFloat32s(*x, depth+1, left)
	default:
		return nil, fmt.Errorf("unsupported value %T", v)
	}
	if *left -= len(out); err == nil && *left < 0 {
		err = fmt.Errorf("more than %d numbers in one value", maxPickleNumbers)
	}
	return out, err
}

func listFloat32s(items []any, depth int, left *int) ([]float32, error) {
	out := make([]float32, 0, min(len(items), *left+1))
	for _, it := range items {
		switch n := it.(type) {
		case float64:
			out = append(out, float32(n))
		case int:
			out = append(out, float32(n))
		case numpyScalar:
			out = append(out, float32(n.f))
		default:
			inner, err := nestedFloat32s(it, depth, left)
			if err != nil {
				return nil, err
			}
			out = append(out, inner...)
			continue
		}
		if *left--; *left < 0 {
			return nil, fmt.Errorf("more than %d numbers in one value", maxPickleNumbers)
		}
	}
	return out, nil
}

func tensorFloat32s(t *pytorch.Tensor) ([]float32, error) {
	var data []float32
	switch s := t.Source.(type) {
	case *pytorch.HalfStorage:
		data = s.Data
	case *pytorch.FloatStorage:
		data = s.Data
	case *pytorch.BFloat16Storage:
		data = s.Data
	case *pytorch.DoubleStorage:
		data = make([]float32, len(s.Data))
		for i, f := range s.Data {
			data[i] = float32(f)
		}
	default:
		return nil, fmt.Errorf("torch storage %T is not a float type", t.Source)
	}
	n, ok := elements(t.Size, len(data))
	if !ok || len(t.Stride) != len(t.Size) {
		return nil, fmt.Errorf("torch tensor of size %v, stride %v does not fit its storage of %d", t.Size, t.Stride, len(data))
	}
	// Contiguous (row-major) tensors only; fetch_features.py stores 1-D ones.
	want := 1
	for i := len(t.Size) - 1; i >= 0; i-- {
		if t.Size[i] > 1 && t.Stride[i] != want {
			return nil, errors.New("non-contiguous torch tensor")
		}
		want *= t.Size[i]
	}
	if t.StorageOffset < 0 || t.StorageOffset > len(data)-n {
		return nil, fmt.Errorf("torch tensor of %d elements at offset %d exceeds its storage of %d", n, t.StorageOffset, len(data))
	}
	return append([]float32(nil), data[t.StorageOffset:t.StorageOffset+n]...), nil
}

// elements is a shape's element count; false where a dimension is negative
// or the count passes limit (what the data there can hold).
func elements(shape []int, limit int) (int, bool) {
	n := 1
	for _, d := range shape {
		if d < 0 || d != 0 && n > limit/d {
			return 0, false
		}
		n *= d
	}
	return n, n <= limit
}

// findPickleClass resolves the globals Auto-UI pickles reference.
func findPickleClass(module, name string) (any, error) {
	switch module + "." + name {
	case "numpy.core.multiarray._reconstruct", "numpy._core.multiarray._reconstruct":
		return reconstructFunc{}, nil
	case "numpy.ndarray":
		return ndarrayClass{}, nil
	case "numpy.dtype":
		return dtypeClass{}, nil
	case "numpy.core.multiarray.scalar", "numpy._core.multiarray.scalar":
		return scalarFunc{}, nil
	case "_codecs.encode":
		return codecsEncode{}, nil
	case "torch._utils._rebuild_tensor_v2":
		return &pytorch.RebuildTensorV2{}, nil
	case "torch.storage._load_from_bytes":
		return loadFromBytes{}, nil
	case "collections.OrderedDict":
		return &types.OrderedDictClass{}, nil
	}
	if strings.HasPrefix(module, "torch") {
		return nil, fmt.Errorf("unsupported torch object %s.%s in the pickle; convert the features to numpy: "+
			"for ep in data: for s in ep['data']: s['image'] = s['image'].float().numpy(); then pickle.dump(data, f)", module, name)
	}
	return nil, fmt.Errorf("unsupported Python object %s.%s in the pickle (expected lists, dicts, numpy arrays or torch tensors)", module, name)
}

// ---- numpy

type ndarrayClass struct{}

type reconstructFunc struct{}

func (reconstructFunc) Call(args ...any) (any, error) { return &ndarray{}, nil }

type ndarray struct {
	shape []int
	dtype *dtype
	data  []byte
	list  []any // object arrays
}

// PySetState takes ndarray.__reduce__'s state: (version, shape, dtype, is_fortran, data).
func (a *ndarray) PySetState(state any) error {
	t, ok := state.(*types.Tuple)
	if !ok || t.Len() != 5 {
		return fmt.Errorf("numpy array state: want a 5-tuple, have %T", state)
	}
	shape, ok := t.Get(1).(*types.Tuple)
	if !ok {
		return errors.New("numpy array state: bad shape")
	}
	for _, d := range *shape {
		n, ok := toInt(d)
		if !ok || n < 0 {
			return errors.New("numpy array state: bad shape")
		}
		a.shape = append(a.shape, n)
	}
	if a.dtype, ok = t.Get(2).(*dtype); !ok {
		return fmt.Errorf("numpy array state: dtype is %T", t.Get(2))
	}
	if fortran, _ := t.Get(3).(bool); fortran && len(a.shape) > 1 {
		return errors.New("numpy array state: Fortran-order arrays are not supported")
	}
	switch d := t.Get(4).(type) {
	case []byte:
		a.data = d
	case string: // protocol < 3 without _codecs
		a.data = []byte(d)
	case *types.List:
		a.list = *d
	default:
		return fmt.Errorf("numpy array state: data is %T", d)
	}
	return nil
}

func (a *ndarray) float32s() ([]float32, error) {
	if a.list != nil {
		left := maxPickleNumbers
		return listFloat32s(a.list, 1, &left)
	}
	w := a.dtype.width()
	if w == 0 {
		return nil, fmt.Errorf("numpy dtype %q is not numeric", a.dtype.kind)
	}
	n, ok := elements(a.shape, len(a.data)/w)
	if !ok || len(a.data) != n*w {
		return nil, fmt.Errorf("numpy array of shape %v has %d bytes of %d-byte values", a.shape, len(a.data), w)
	}
	out := make([]float32, n)
	for i := range out {
		f, err := a.dtype.decode(a.data[i*w : (i+1)*w])
		if err != nil {
			return nil, err
		}
		out[i] = float32(f)
	}
	return out, nil
}

type dtypeClass struct{}

// Call is numpy.dtype(kind, align, copy).
func (dtypeClass) Call(args ...any) (any, error) {
	if len(args) < 1 {
		return nil, errors.New("numpy dtype: no arguments")
	}
	k, ok := args[0].(string)
	if !ok {
		return nil, fmt.Errorf("numpy dtype: kind is %T", args[0])
	}
	return &dtype{kind: k, order: binary.ByteOrder(binary.LittleEndian)}, nil
}

type dtype struct {
	kind  string // e.g. "f4", "f8", "i8", "u1"
	order binary.ByteOrder
}

// PySetState takes dtype state (version, byteorder, ...).
func (d *dtype) PySetState(state any) error {
	if t, ok := state.(*types.Tuple); ok && t.Len() >= 2 {
		if bo, ok := t.Get(1).(string); ok && bo == ">" {
			d.order = binary.BigEndian
		}
	}
	return nil
}

func (d *dtype) width() int {
	switch d.kind {
	case "f2", "i2", "u2":
		return 2
	case "f4", "i4", "u4":
		return 4
	case "f8", "i8", "u8":
		return 8
	case "i1", "u1", "b1":
		return 1
	}
	return 0
}

func (d *dtype) decode(b []byte) (float64, error) {
	switch d.kind {
	case "f2":
		return float64(math.Float32frombits(pytorch.FloatBits16to32(d.order.Uint16(b)))), nil
	case "f4":
		return float64(math.Float32frombits(d.order.Uint32(b))), nil
	case "f8":
		return math.Float64frombits(d.order.Uint64(b)), nil
	case "i1":
		return float64(int8(b[0])), nil
	case "u1", "b1":
		return float64(b[0]), nil
	case "i2":
		return float64(int16(d.order.Uint16(b))), nil
	case "u2":
		return float64(d.order.Uint16(b)), nil
	case "i4":
		return float64(int32(d.order.Uint32(b))), nil
	case "u4":
		return float64(d.order.Uint32(b)), nil
	case "i8":
		return float64(int64(d.order.Uint64(b))), nil
	case "u8":
		return float64(d.order.Uint64(b)), nil
	}
	return 0, fmt.Errorf("numpy dtype %q is not numeric", d.kind)
}

// numpyScalar is a numpy scalar (e.g. np.float32(0.5)) as float64.
type numpyScalar struct{ f float64 }

type scalarFunc struct{}

// Call is numpy.core.multiarray.scalar(dtype, bytes).
func (scalarFunc) Call(args ...any) (any, error) {
	if len(args) != 2 {
		return nil, errors.New("numpy scalar: want (dtype, data)")
	}
	d, ok := args[0].(*dtype)
	if !ok {
		return nil, errors.New("numpy scalar: bad dtype")
	}
	var b []byte
	switch x := args[1].(type) {
	case []byte:
		b = x
	case string:
		b = []byte(x)
	}
	if d.width() == 0 || len(b) != d.width() {
		return nil, fmt.Errorf("numpy scalar of dtype %q has %d bytes", d.kind, len(b))
	}
	f, err := d.decode(b)
	return numpyScalar{f}, err
}

// codecsEncode is _codecs.encode(str, "latin1"), how protocol-2 pickles store bytes.
type codecsEncode struct{}

func (codecsEncode) Call(args ...any) (any, error) {
	if len(args) < 1 {
		return nil, errors.New("_codecs.encode: no arguments")
	}
	s, ok := args[0].(string)
	if !ok {
		return nil, errors.New("_codecs.encode: not a string")
	}
	out := make([]byte, 0, len(s))
	for _, r := range s {
		if r > 255 {
			return nil, errors.New("_codecs.encode: not latin-1")
		}
		out = append(out, byte(r))
	}
	return out, nil
}

// ---- torch

// loadFromBytes is torch.storage._load_from_bytes: a storage saved with
// torch.save's legacy (non-zip) format, which plain pickle uses for tensors.
type loadFromBytes struct{}

func (loadFromBytes) Call(args ...any) (any, error) {
	if len(args) != 1 {
		return nil, errors.New("torch _load_from_bytes: want one argument")
	}
	b, ok := args[0].([]byte)
	if !ok {
		return nil, fmt.Errorf("torch _load_from_bytes: argument is %T", args[0])
	}
	return loadLegacyStorage(bytes.NewReader(b))
}

func unpickleOne(r *bytes.Reader) (any, error) {
	u := pickle.NewUnpickler(r)
	return loadPickleBytes(&u, r)
}

const torchLegacyMagic = "1950a86a20f9469cfc6c"

// loadLegacyStorage reads torch's legacy serialization: magic number,
// protocol version, system info, the object pickle (storages as persistent
// ids), the storage keys, then each storage as int64 count + raw data.
func loadLegacyStorage(r *bytes.Reader) (any, error) {
	magic, err := unpickleOne(r)
	if err != nil {
		return nil, fmt.Errorf("torch legacy storage: %w", err)
	}
	if m, ok := magic.(*big.Int); !ok || m.Text(16) != torchLegacyMagic {
		return nil, errors.New("torch legacy storage: bad magic number")
	}
	for i := 0; i < 2; i++ { // protocol version, sys info
		if _, err := unpickleOne(r); err != nil {
			return nil, fmt.Errorf("torch legacy storage: %w", err)
		}
	}
	storages := map[string]pytorch.StorageInterface{}
	u := pickle.NewUnpickler(r)
	u.FindClass = func(module, name string) (any, error) {
		switch module + "." + name {
		case "torch.HalfStorage":
			return &pytorch.HalfStorageClass{}, nil
		case "torch.FloatStorage":
			return &pytorch.FloatStorageClass{}, nil
		case "torch.DoubleStorage":
			return &pytorch.DoubleStorageClass{}, nil
		case "torch.BFloat16Storage":
			return &pytorch.BFloat16StorageClass{}, nil
		}
		return nil, fmt.Errorf("unsupported torch storage %s.%s", module, name)
	}
	u.PersistentLoad = func(id any) (any, error) {
		t, ok := id.(*types.Tuple)
		if !ok || t.Len() < 5 {
			return nil, errors.New("torch legacy storage: bad persistent id")
		}
		if tag, _ := t.Get(0).(string); tag != "storage" {
			return nil, fmt.Errorf("torch legacy storage: persistent id %q", tag)
		}
		cls, ok1 := t.Get(1).(pytorch.StorageClassInterface)
		key, ok2 := t.Get(2).(string)
		loc, _ := t.Get(3).(string)
		size, ok3 := t.Get(4).(int)
		if !ok1 || !ok2 || !ok3 || size < 0 || size > r.Len() {
			return nil, errors.New("torch legacy storage: bad storage id")
		}
		if t.Len() > 5 && t.Get(5) != nil {
			return nil, errors.New("torch legacy storage: storage views are not supported")
		}
		s, ok := storages[key]
		if !ok {
			s = cls.New(size, loc)
			storages[key] = s
		}
		return s, nil
	}
	obj, err := loadPickleBytes(&u, r)
	if err != nil {
		return nil, fmt.Errorf("torch legacy storage: %w", err)
	}
	keysObj, err := unpickleOne(r)
	if err != nil {
		return nil, fmt.Errorf("torch legacy storage: keys: %w", err)
	}
	keys, ok := keysObj.(*types.List)
	if !ok {
		return nil, errors.New("torch legacy storage: bad key list")
	}
	for _, k := range *keys {
		ks, _ := k.(string)
		s, ok := storages[ks]
		if !ok {
			return nil, fmt.Errorf("torch legacy storage: unknown key %v", k)
		}
		var n [8]byte
		if _, err := r.Read(n[:]); err != nil {
			return nil, fmt.Errorf("torch legacy storage: %w", err)
		}
		count := binary.LittleEndian.Uint64(n[:])
		if count > uint64(r.Len()) {
			return nil, errors.New("torch legacy storage: truncated data")
		}
		if err := s.SetFromFileWithSize(r, int(count)); err != nil {
			return nil, fmt.Errorf("torch legacy storage: %w", err)
		}
	}
	return obj, nil
}
