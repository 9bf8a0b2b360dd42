package hostlist

import (
	"reflect"
	"strings"
	"testing"
)

func TestExpand(t *testing.T) {
	tests := []struct {
		expr string
		want []string
	}{
		{"a", []string{"a"}},
		{"a,b", []string{"a", "b"}},
		{"node[01-03]", []string{"node01", "node02", "node03"}},
		{"node[1-2,10]", []string{"node1", "node2", "node10"}},
		{"n[08-10]", []string{"n08", "n09", "n10"}},
		{"r[1-2]n[1-2]", []string{"r1n1", "r1n2", "r2n1", "r2n2"}},
		{"gpu[1-2]-ib,cpu", []string{"gpu1-ib", "gpu2-ib", "cpu"}},
		{"root@h[1-2]:2222", []string{"root@h1:2222", "root@h2:2222"}},
		{" a , b ", []string{"a", "b"}},
	}
	for _, tc := range tests {
		got, err := Expand(tc.expr)
		if err != nil {
			t.Fatalf("Expand(%q): %v", tc.expr, err)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Expand(%q) = %v, want %v", tc.expr, got, tc.want)
		}
	}
}

func TestExpandErrors(t *testing.T) {
	tests := []struct{ expr, wantSub string }{
		{"", "names no hosts"},
		{"node[1-", "unclosed"},
		{"node]1", "unmatched"},
		{"node[3-1]", "backwards"},
		{"node[a-b]", "bad range"},
		{"node[]", "empty brackets"},
		{"n[[1]]", "nested"},
		{"n[0-99999999]", "more than"},
	}
	for _, tc := range tests {
		_, err := Expand(tc.expr)
		if err == nil || !strings.Contains(err.Error(), tc.wantSub) {
			t.Errorf("Expand(%q) error = %v, want containing %q", tc.expr, err, tc.wantSub)
		}
	}
}
