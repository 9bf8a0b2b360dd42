package cluster

import (
	"os"
	"reflect"
	"testing"
)

// Subset narrows hosts, islands, links and both measured blocks together,
// and the narrowed file resolves.
func TestSubsetKeepsFileValid(t *testing.T) {
	data, err := os.ReadFile("../../bench/crosscluster/cluster-handwritten.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		keep        []string
		islands     int
		measured    []string
		measuredRow []float64
	}{
		{[]string{"node01", "node02"}, 1, []string{"node01", "node02"}, []float64{0, 14}},
		{[]string{"node04", "node01"}, 2, []string{"node01", "node04"}, []float64{0, 0.096}},
		{[]string{"node01", "node02", "node03", "node04"}, 2, []string{"node01", "node03", "node02", "node04"}, []float64{0, 0.096, 14, 0.096}},
	} {
		f, err := Parse(data)
		if err != nil {
			t.Fatal(err)
		}
		keep := map[string]bool{}
		for _, h := range tc.keep {
			keep[h] = true
		}
		f.Subset(keep)
		if err := f.Validate(); err != nil {
			t.Errorf("%v: narrowed file invalid: %v", tc.keep, err)
			continue
		}
		if len(f.Clusters) != tc.islands {
			t.Errorf("%v: %d islands, want %d", tc.keep, len(f.Clusters), tc.islands)
		}
		if !reflect.DeepEqual(f.Measured.Hosts, tc.measured) || !reflect.DeepEqual(f.Measured.GbitPerS[0], tc.measuredRow) {
			t.Errorf("%v: measured %v %v, want %v with first row %v", tc.keep, f.Measured.Hosts, f.Measured.GbitPerS, tc.measured, tc.measuredRow)
		}
		c, err := f.Resolve()
		if err != nil {
			t.Errorf("%v: %v", tc.keep, err)
		} else if len(c.Hosts) != len(tc.keep) {
			t.Errorf("%v: resolved %d hosts", tc.keep, len(c.Hosts))
		}
	}
}
