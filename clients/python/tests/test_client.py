"""The client against a real `autoui serve` on the tiny test model."""

import pytest

from autoui_client import Action, AutouiError, Client, Prediction, png_encode
from conftest import GOLDEN, SCREENS, read_npy


def _client(server, **kw):
    return Client(server.url, **kw)


# Cases with and without history, a swipe, a typed text, a token limit and non-ASCII text.
@pytest.mark.parametrize("case_id", ["case00", "case03", "case05", "case09", "case12", "case18"])
def test_golden_features(server, golden, case_id):
    """Features in, the engine's golden output out: the server's answer is the engine's."""
    c = golden[case_id]
    feats = read_npy(GOLDEN / c["tensors"]["image_features"])
    p = _client(server).predict(
        features=feats, goal=c["goal"], history=c["history"], max_new_tokens=c["max_new_tokens"]
    )
    assert p.raw == c["text"]
    assert p.output_ids == c["generated_ids"]
    assert p.source_ids == c["input_ids"]
    assert p.source_text == c["source_text"]
    assert p.tokens == len(c["generated_ids"])
    assert p.serve is not None and p.serve["batch_size"] >= 1
    if case_id == "case12":  # cut at 16 tokens: no action
        assert not p.ok and p.error and p.action is None
    else:
        assert p.ok and p.error is None
        assert p.action == p.to_action().to_json()
        assert p.action_type in c["text"]


def test_golden_screen(server, golden):
    c = golden["case00"]
    p = _client(server).predict(screen=str(SCREENS.parent / c["screen"]), goal=c["goal"])
    assert p.raw == c["text"]
    assert p.output_ids == c["generated_ids"]
    assert p.to_action() == Action.tap(0.405, 0.155)
    assert p.plan == ["DUAL_POINT", "DUAL_POINT", "STATUS_TASK_COMPLETE"]


def _screen_forms():
    """The same screen as a path, bytes, a PIL image and a numpy array (as installed)."""
    path = SCREENS / "home_720x1280.png"
    forms = {"path": str(path), "pathlib": path, "bytes": path.read_bytes()}
    try:
        from PIL import Image
    except ImportError:
        return forms, "Pillow not installed: PIL image and numpy forms untested"
    img = Image.open(path)
    img.load()
    forms["pil"] = img
    forms["pil_rgb"] = img.convert("RGB")
    try:
        import numpy as np
    except ImportError:
        return forms, "numpy not installed: array forms untested"
    arr = np.asarray(img.convert("RGB"))
    forms["numpy_rgb"] = arr
    forms["numpy_rgba"] = np.asarray(img.convert("RGBA"))
    forms["numpy_view"] = np.asarray(img.convert("RGB"))[:, :, :]  # a non-owning view
    # the stdlib encoder (used when Pillow is absent), on the same pixels
    forms["stdlib_png"] = png_encode(arr.tobytes(), arr.shape[1], arr.shape[0], 3)
    return forms, None


def test_screen_forms_agree(server):
    forms, missing = _screen_forms()
    c = _client(server)
    got = {name: c.predict(screen=s, goal="Open Chrome") for name, s in forms.items()}
    want = got["path"]
    assert want.ok
    for name, p in got.items():
        assert (p.raw, p.output_ids) == (want.raw, want.output_ids), name
    if missing:
        pytest.skip(missing)


def test_history_round_trips(server, golden):
    """History as Actions, dicts and Predictions gives the prompt of the golden case."""
    c = golden["case10"]  # every action type in its history
    feats = read_npy(GOLDEN / c["tensors"]["image_features"])
    cl = _client(server)
    as_actions = [Action.from_json(h) for h in c["history"]]
    for hist in (c["history"], as_actions, [a.to_json() for a in as_actions]):
        p = cl.predict(features=feats, goal=c["goal"], history=hist, max_new_tokens=c["max_new_tokens"])
        assert p.source_ids == c["input_ids"]
        assert p.raw == c["text"]
    # a prediction fed back as history equals its action fed as a dict or an Action
    first = cl.predict(features=feats, goal="Open the Maps app")
    srcs = {
        kind: cl.predict(features=feats, goal="Open the Maps app", history=[h]).source_ids
        for kind, h in (("prediction", first), ("dict", first.action), ("action", first.to_action()))
    }
    assert srcs["prediction"] == srcs["dict"] == srcs["action"]
    assert srcs["prediction"] != first.source_ids


def test_constrain_and_options(server, golden):
    c = golden["case00"]
    feats = read_npy(GOLDEN / c["tensors"]["image_features"])
    p = _client(server).predict(features=feats, goal=c["goal"], constrain=True)
    assert p.ok
    short = _client(server).predict(features=feats, goal=c["goal"], max_new_tokens=5)
    assert short.tokens <= 5 and not short.ok


def test_auth(auth_server, token):
    with pytest.raises(AutouiError) as e:
        Client(auth_server.url).predict(screen=SCREENS / "home_720x1280.png", goal="Open Chrome")
    assert (e.value.status, e.value.kind) == (401, "unauthorized")
    with pytest.raises(AutouiError) as e:
        Client(auth_server.url, token="wrong").predict(screen=SCREENS / "home_720x1280.png", goal="Open Chrome")
    assert e.value.kind == "unauthorized"
    p = Client(auth_server.url, token=token).predict(screen=SCREENS / "home_720x1280.png", goal="Open Chrome")
    assert p.ok


@pytest.mark.parametrize(
    "kw",
    [
        {"screen": b"this is not an image"},
        {"features": [0.5, 0.25]},  # not the bundle's image_dim
    ],
    ids=["not-an-image", "short-features"],
)
def test_bad_request_not_retried(server, kw):
    c = _client(server, max_wait=30)
    with pytest.raises(AutouiError) as e:
        c.predict(goal="Open Chrome", **kw)
    assert (e.value.status, e.value.kind) == (400, "bad_request")
    assert e.value.message
    assert c.last_retries == 0


def test_probes(server):
    c = _client(server)
    assert c.health() and c.ready()
    c.wait_ready(timeout=5)
    assert "batch" in c.metrics()
    assert not Client("http://127.0.0.1:9", timeout=2).health()  # nothing listens on port 9


def test_argument_errors():
    c = Client("http://127.0.0.1:9")
    with pytest.raises(ValueError):
        c.predict(goal="x")  # neither screen nor features
    with pytest.raises(ValueError):
        c.predict(screen=b"x", features=[1.0], goal="x")
    with pytest.raises(TypeError):
        c.predict(screen=12345, goal="x")
    with pytest.raises(ValueError):
        Client("ftp://example.com")


def test_action_helpers():
    assert Action.tap(0.25, 0.5).to_json() == {
        "action_type": "DUAL_POINT", "touch_point": [0.25, 0.5], "lift_point": [0.25, 0.5], "typed_text": "",
    }  # fmt: skip
    s = Action.swipe(0.8, 0.5, 0.2, 0.5)
    assert s.touch_point == (0.8, 0.5) and s.lift_point == (0.2, 0.5) and not s.is_tap()
    assert Action.tap(0.3, 0.3).is_tap() and Action.swipe(0.5, 0.5, 0.53, 0.5).is_tap()
    assert not Action.swipe(0.5, 0.5, 0.53, 0.53).is_tap()  # 0.042 apart
    assert Action.type("hi").to_json() == {
        "action_type": "TYPE", "touch_point": [-1.0, -1.0], "lift_point": [-1.0, -1.0], "typed_text": "hi",
    }  # fmt: skip
    for make, name in [
        (Action.back, "PRESS_BACK"), (Action.home, "PRESS_HOME"), (Action.enter, "PRESS_ENTER"),
        (Action.complete, "STATUS_TASK_COMPLETE"), (Action.impossible, "STATUS_TASK_IMPOSSIBLE"),
    ]:  # fmt: skip
        a = make()
        assert a.action_type == name and a.touch_point == (-1.0, -1.0) and Action.from_json(a.to_json()) == a
    # Auto-UI's string points and missing fields
    a = Action.from_json({"action_type": "DUAL_POINT", "touch_point": "[0.1, 0.2]", "lift_point": "[0.3, 0.4]"})
    assert a == Action.swipe(0.1, 0.2, 0.3, 0.4)
    assert Action.from_json({"action_type": "PRESS_BACK"}) == Action.back()
    with pytest.raises(ValueError):
        Action("SCROLL")


def test_prediction_parse():
    p = Prediction.from_json({"raw": "garbage", "error": "no action", "tokens": 3, "output_ids": [1, 2, 3]})
    assert not p.ok and p.action is None and p.tokens == 3
    with pytest.raises(ValueError):
        p.to_action()
    p = Prediction.from_json({"action_type": "TYPE", "touch_point": [-1, -1], "lift_point": [-1, -1], "typed_text": "x",
                              "future_field": 1})  # fmt: skip
    assert p.to_action() == Action.type("x") and p.data["future_field"] == 1


def test_array_without_pillow(monkeypatch):
    """Without Pillow an array is encoded by the stdlib PNG encoder, to the same pixels."""
    np = pytest.importorskip("numpy")
    Image = pytest.importorskip("PIL.Image")
    import io
    import sys

    from autoui_client import encode_screen

    rgb = np.asarray(Image.open(SCREENS / "search_720x1280.png").convert("RGB"))
    rgba = np.dstack([rgb, np.full(rgb.shape[:2], 200, np.uint8)])
    gray = rgb[:, :, 0].copy()
    strided = rgb[::2, ::3]  # not C-contiguous
    with_pil = {name: encode_screen(a) for name, a in [("rgb", rgb), ("rgba", rgba), ("gray", gray), ("strided", strided)]}
    monkeypatch.setitem(sys.modules, "PIL", None)  # `from PIL import Image` now raises ImportError
    for name, a in [("rgb", rgb), ("rgba", rgba), ("gray", gray), ("strided", strided)]:
        png = encode_screen(a)
        assert png.startswith(b"\x89PNG") and png != with_pil[name]
        monkeypatch.delitem(sys.modules, "PIL")
        back = np.asarray(Image.open(io.BytesIO(png)))
        monkeypatch.setitem(sys.modules, "PIL", None)
        assert back.shape == a.shape and (back == a).all(), name
    with pytest.raises(TypeError):
        encode_screen(rgb.astype(np.float32))
    with pytest.raises(TypeError):
        encode_screen(np.zeros((4, 4, 2), np.uint8))


def test_concurrent_predictions_match_sequential(server, golden):
    """One Client shared by threads: answers (batched by the server) equal one-by-one ones."""
    from concurrent.futures import ThreadPoolExecutor

    ids = ["case00", "case01", "case03", "case05", "case07", "case17", "case18", "case19"]
    c = _client(server)

    def run(case_id):
        g = golden[case_id]
        return c.predict(features=read_npy(GOLDEN / g["tensors"]["image_features"]), goal=g["goal"],
                         history=g["history"], max_new_tokens=g["max_new_tokens"])  # fmt: skip

    with ThreadPoolExecutor(len(ids)) as ex:
        got = list(ex.map(run, ids * 2))
    for case_id, p in zip(ids * 2, got):
        assert p.raw == golden[case_id]["text"] and p.output_ids == golden[case_id]["generated_ids"], case_id
    assert all(p.serve["batch_size"] >= 1 for p in got)


@pytest.mark.parametrize(
    "kw,field",
    [
        ({"features": [float("nan")] * 64}, "features[0]"),
        ({"features": [0.5, float("inf")]}, "features[1]"),
        ({"features": [0.5], "history": [Action.tap(0.5, float("-inf"))]}, "history[0].touch_point: x"),
        ({"features": [0.5], "history": [Action.home(), {"action_type": "DUAL_POINT", "touch_point": [0.1, 0.2],
                                                         "lift_point": [float("nan"), 0.5]}]},
         "history[1].lift_point: y"),
        ({"screen": b"x", "history": [Action.swipe(0.1, 0.2, 0.3, float("nan"))]}, "history[0].lift_point: x"),
    ],
    ids=["nan-features", "inf-feature", "inf-action", "nan-dict", "nan-with-screen"],
)  # fmt: skip
def test_non_finite_numbers_refused_before_sending(kw, field):
    """JSON has no NaN or Infinity: the client names the field instead of sending
    what the server can only call `invalid character 'N'`."""
    c = Client("http://127.0.0.1:9", max_wait=0)  # nothing listens: a request would fail otherwise
    with pytest.raises(ValueError, match="not a finite number") as e:
        c.predict(goal="x", **kw)
    assert str(e.value).startswith(field)


def _raw_predict(server, body):
    """POST a body as is (no client): the server's status and answer."""
    import json
    import urllib.error
    import urllib.request

    headers = {"Content-Type": "application/json"}
    req = urllib.request.Request(server.url + "/v1/predict", json.dumps(body).encode(), headers)
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


TAP = {"action_type": "DUAL_POINT", "touch_point": [0.5, 0.25], "lift_point": [0.5, 0.25], "typed_text": ""}
HOME = Action.home().to_json()
BACK = Action.back().to_json()
TYPED = Action.type("hi").to_json()

# (history action, the canonical action it means; None: the server refuses it)
HISTORY_FORMS = [
    ({"action_type": 4, "touch_point": [0.5, 0.25], "lift_point": [0.5, 0.25]}, TAP),  # AITW's numbering
    ({"action_type": "4", "touch_point": [0.5, 0.25]}, TAP),  # a DUAL_POINT without lift_point is a tap
    ({"action_type": "dual_point", "touch_point": "[0.5, 0.25]", "lift_point": None}, TAP),
    ({"action_type": "DUAL_POINT", "touch_point": "(.5, 0.25,)", "lift_point": "[5e-1, 25E-2]"}, TAP),
    ({"action_type": "DUAL_POINT", "touch_point": [0.5, 0.25], "lift_point": [0.5, 0.25], "typed_text": None}, TAP),
    ({"action_type": 6}, HOME),
    ({"action_type": " +06\t"}, HOME),
    ({"action_type": "press_home"}, HOME),
    ({"action_type": "Press_Home", "touch_point": None}, HOME),
    ({"action_type": "\u3000PReſſ_HOME\n"}, HOME),  # Go's EqualFold: long s folds to s
    ({"action_type": "press_bac\u212a"}, BACK),  # and the Kelvin sign to k
    ({"action_type": 3, "typed_text": "hi"}, TYPED),
    ({"action_type": "type", "typed_text": "hi"}, TYPED),
    ({"action_type": 4.0, "touch_point": [0.5, 0.25]}, None),
    ({"action_type": "4.0", "touch_point": [0.5, 0.25]}, None),
    ({"action_type": True}, None),
    ({"action_type": 0}, None),
    ({"action_type": 8}, None),
    ({"action_type": "12"}, None),
    ({"action_type": "\u0666"}, None),  # an Arabic-Indic 6: not one of Atoi's digits
    ({"action_type": "SCROLL"}, None),
    ({"action_type": ""}, None),
    ({"action_type": None}, None),
    ({"action_type": "\x1cPRESS_HOME"}, None),  # not space to Go's TrimSpace
    ({"action_type": "PREß_BACK"}, None),
    ({"action_type": "DUAL_POıNT", "touch_point": [0.5, 0.25]}, None),
    ({"touch_point": [0.5, 0.25]}, None),
    ({"action_type": "DUAL_POINT"}, None),  # no touch point
    ({"action_type": "DUAL_POINT", "touch_point": ["0.5", "0.25"]}, None),
    ({"action_type": "DUAL_POINT", "touch_point": [True, 0.25]}, None),
    ({"action_type": "DUAL_POINT", "touch_point": [0.5]}, None),
    ({"action_type": "DUAL_POINT", "touch_point": "[0.5, 0.25, 0.1]"}, None),
    ({"action_type": "DUAL_POINT", "touch_point": "[NaN, 0.25]"}, None),
    ({"action_type": "DUAL_POINT", "touch_point": "0.5, 0.25"}, None),
    ({"action_type": "TYPE", "typed_text": 5}, None),
    ({"action_type": "PRESS_HOME", "typed": "x"}, None),  # a misspelt key
]


@pytest.mark.parametrize("form,want", HISTORY_FORMS, ids=[repr(f) for f, _ in HISTORY_FORMS])
def test_history_dicts_read_as_the_server_reads_them(server, golden, form, want):
    """The client takes exactly the history actions the server takes, meaning the same."""
    c = golden["case00"]
    feats = read_npy(GOLDEN / c["tensors"]["image_features"])
    status, answer = _raw_predict(server, {"goal": c["goal"], "features": feats, "history": [form],
                                           "options": {"max_new_tokens": 1}})  # fmt: skip
    assert status == (400 if want is None else 200), answer
    cl = _client(server)
    if want is None:
        with pytest.raises(ValueError, match=r"^history\[0\]"):
            cl.predict(features=feats, goal=c["goal"], history=[form], max_new_tokens=1)
        return
    assert Action.from_json(form).to_json() == want
    p = cl.predict(features=feats, goal=c["goal"], history=[form], max_new_tokens=1)
    assert p.source_ids == answer["source_ids"]
    assert p.source_ids == cl.predict(features=feats, goal=c["goal"], history=[want], max_new_tokens=1).source_ids
