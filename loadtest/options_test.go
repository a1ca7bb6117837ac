package loadtest

import (
	"strings"
	"testing"
)

// TestValidateBareAlone: bare sizes its bodies from a service configuration
// that ran before it, so --configs bare alone is refused before the preload
// (it used to fail after minutes of preloading), and bare after a service is
// accepted.
func TestValidateBareAlone(t *testing.T) {
	for _, c := range []struct {
		configs []string
		wantErr bool
	}{
		{[]string{ConfigBare}, true},
		{[]string{"disk", ConfigBare}, false},
		{[]string{"disk"}, false},
	} {
		o := Options{Bin: "x", BareBin: "x", Configs: c.configs}.EnsureDefaults()
		err := o.Validate()
		if got := err != nil && strings.Contains(err.Error(), "configuration bare alone"); got != c.wantErr {
			t.Errorf("configs %v: Validate() = %v, want the bare-alone error: %v", c.configs, err, c.wantErr)
		}
	}
}
