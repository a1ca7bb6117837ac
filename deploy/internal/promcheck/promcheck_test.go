package promcheck

import (
	"errors"
	"reflect"
	"testing"
)

func TestMeasure(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`up{job="a"} == 0`, `up{job="a"}`},
		{`10 < rate(x[5m])`, `rate(x[5m])`},
		{`(sum by (i) (a) / sum by (i) (b)) > 0.01`, `(sum by (i) (a) / sum by (i) (b))`},
		{`time() - t > 60`, `time() - t`},
	} {
		got, err := Measure(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("Measure(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{`up`, `a > b`, `a > bool 1`} {
		if _, err := Measure(bad); !errors.Is(err, ErrNoThreshold) {
			t.Errorf("Measure(%q) error = %v, want ErrNoThreshold", bad, err)
		}
	}
	if _, err := Measure(`rate(x[5m]`); err == nil || errors.Is(err, ErrNoThreshold) {
		t.Errorf("Measure of a syntax error = %v, want a parse error", err)
	}
}

func TestSelectors(t *testing.T) {
	got, err := Selectors(`sum(rate(a{x="1"}[5m])) / sum(rate(b[5m] offset 1m)) > 0`)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`a{x="1"}`, `b`}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Selectors = %q, want %q", got, want)
	}
}
