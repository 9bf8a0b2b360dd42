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
		{"[::1]:2222", []string{"[::1]:2222"}},
		{"u@[fe80::1]:22,n[1-2]", []string{"u@[fe80::1]:22", "n1", "n2"}},
		{"n[9-10]", []string{"n9", "n10"}},
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
		{"n[0-99999999]", "more than 16384 hosts"},
		{"rack[1-1000]-node[1-1000]", "more than 16384 hosts"},
		{"a[1-16000],b[1-385]", "more than 16384 hosts"},
		{"n[1-99999999999999999999999]", "bad range"},
		{"n[+1-2]", "bad range"},
		{"n[1-2]" + strings.Repeat("x", 400), "at most 300"},
	}
	for _, tc := range tests {
		_, err := Expand(tc.expr)
		if err == nil || !strings.Contains(err.Error(), tc.wantSub) {
			t.Errorf("Expand(%q) error = %v, want containing %q", tc.expr, err, tc.wantSub)
		}
	}
}

// The count is exact at the limit, and nothing is expanded past it.
func TestCountAtLimit(t *testing.T) {
	n, err := Count("r[1-128]n[1-128]")
	if err != nil || n != 16384 {
		t.Fatalf("Count = %d, %v; want 16384", n, err)
	}
	if _, err := Count("r[1-128]n[1-128],x"); err == nil {
		t.Fatal("16385 hosts accepted")
	}
}
