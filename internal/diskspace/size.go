package diskspace

import "fmt"

// FormatSize renders n bytes in the largest binary unit that divides it
// ("256MiB", "1GiB", "1000B"), as the command line's size flags read it
// back.
func FormatSize(n uint64) string {
	for _, u := range []struct {
		suffix string
		mult   uint64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.mult && n%u.mult == 0 {
			return fmt.Sprintf("%d%s", n/u.mult, u.suffix)
		}
	}
	return fmt.Sprintf("%dB", n)
}
