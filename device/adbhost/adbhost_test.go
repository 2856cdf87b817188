package adbhost

import (
	"bytes"
	"strings"
	"testing"
)

func TestFraming(t *testing.T) {
	var b bytes.Buffer
	if err := WriteRequest(&b, "host:devices"); err != nil || b.String() != "000chost:devices" {
		t.Fatalf("WriteRequest: %q %v", b.String(), err)
	}
	r := strings.NewReader("OKAY0005helloFAIL")
	if s, err := ReadStatus(r); s != "OKAY" || err != nil {
		t.Fatalf("ReadStatus: %q %v", s, err)
	}
	if s, err := ReadString(r); s != "hello" || err != nil {
		t.Fatalf("ReadString: %q %v", s, err)
	}
	if _, err := ReadString(strings.NewReader("zzzzx")); err == nil {
		t.Error("bad length accepted")
	}
	if _, err := ReadString(strings.NewReader("0009short")); err == nil {
		t.Error("short string accepted")
	}
}
