package promcheck

import (
	"errors"
	"reflect"
	"testing"
)

func TestMeasures(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{`up{job="a"} == 0`, []string{`up{job="a"}`}},
		{`10 < rate(x[5m])`, []string{`rate(x[5m])`}},
		{`(sum by (i) (a) / sum by (i) (b)) > 0.01`, []string{`(sum by (i) (a) / sum by (i) (b))`}},
		{`time() - t > 60`, []string{`time() - t`}},
		{`a < b`, []string{`a - b`}},
		{`a < on (i) b`, []string{`a - on (i) b`}},
		{`a < b or increase(c[5m]) > 0`, []string{`a - b`, `increase(c[5m])`}},
	} {
		got, err := Measures(tc.in)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Measures(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{`up`, `a > bool 1`, `a + b`, `a > 1 or b`, `a > 1 and b > 2`} {
		if _, err := Measures(bad); !errors.Is(err, ErrNoThreshold) {
			t.Errorf("Measures(%q) error = %v, want ErrNoThreshold", bad, err)
		}
	}
	if _, err := Measures(`rate(x[5m]`); err == nil || errors.Is(err, ErrNoThreshold) {
		t.Errorf("Measures of a syntax error = %v, want a parse error", err)
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
