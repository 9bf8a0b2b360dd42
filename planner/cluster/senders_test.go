package cluster

import (
	"strings"
	"testing"
)

// senderShares by hand: a 48 Gbit/s NIC on a 4-GPU host that one GPU
// drives at 16 and two at 24: three reach halfway from 24 to 48 (36), four
// the whole; a table starting at two GPUs gives one GPU half of theirs.
func TestSenderShares(t *testing.T) {
	for _, tc := range []struct {
		name string
		pts  []SenderRate
		want []float64 // k = 0..4
	}{
		{"none", nil, nil},
		{"1 and 2 of 4", []SenderRate{{1, 16}, {2, 24}}, []float64{16. / 48, 16. / 48, 24. / 48, 36. / 48, 1}},
		{"from 2", []SenderRate{{2, 24}}, []float64{12. / 48, 12. / 48, 24. / 48, 36. / 48, 1}},
		{"to 4", []SenderRate{{1, 16}, {4, 40}}, []float64{16. / 48, 16. / 48, 24. / 48, 32. / 48, 40. / 48}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := senderShares(tc.pts, 48, 4)
			if len(got) != len(tc.want) {
				t.Fatalf("shares %v, want %v", got, tc.want)
			}
			for k := range got {
				if !near(got[k], tc.want[k]) {
					t.Errorf("k=%d: share %g, want %g", k, got[k], tc.want[k])
				}
			}
		})
	}
}

const sendersDoc = `
clusters:
  - name: a
    hosts: a[1-2]
    gpus_per_host: 4
    gpu: {model: A100-40GB-SXM}
    nics: [{type: ethernet, count: 1, rate_gbit_per_s: 48, senders: [{gpus: 1, rate_gbit_per_s: 16}, {gpus: 2, rate_gbit_per_s: 24}]}]
  - name: b
    hosts: b[1-2]
    gpus_per_host: 4
    gpu: {model: A100-40GB-SXM}
    nics: [{type: ethernet, count: 1, rate_gbit_per_s: 48}]
links:
  - {between: [a, b], type: ethernet, bandwidth_gbit_per_s: 40, senders: [{gpus: 1, rate_gbit_per_s: 8}]}
`

// SenderShare on a resolved file: inside island a its NIC's table; between
// a and b the smaller of a's NIC table and the link's (one GPU: 8 of 40
// on the link against 16 of 48 on the NIC); inside b, which has no table,
// every count reaches the whole; a host to itself is never shared.
func TestSenderShareOfPaths(t *testing.T) {
	c := mustResolve(t, sendersDoc)
	a1, a2, b1, b2 := 0, 1, 2, 3
	for _, tc := range []struct {
		name string
		x, y int
		k    int
		want float64
	}{
		{"inside a, one GPU", a1, a2, 1, 16. / 48},
		{"inside a, two", a1, a2, 2, 24. / 48},
		{"inside a, four", a1, a2, 4, 1},
		{"inside a, more than the host has", a1, a2, 8, 1},
		{"a to b, one GPU: the link's", a1, b1, 1, 8. / 40},
		{"b to a, two GPUs: the link's 8+32/3 of 40, below a's NIC 24 of 48", b1, a2, 2, (8 + 32./3) / 40},
		{"inside b", b1, b2, 1, 1},
		{"a host to itself", a1, a1, 1, 1},
	} {
		if got := c.SenderShare(tc.x, tc.y, tc.k); !near(got, tc.want) {
			t.Errorf("%s: share %g, want %g", tc.name, got, tc.want)
		}
	}
	if !c.HasSenderRates() {
		t.Error("HasSenderRates false with tables")
	}
	plain := mustResolve(t, strings.ReplaceAll(strings.ReplaceAll(sendersDoc,
		`, senders: [{gpus: 1, rate_gbit_per_s: 16}, {gpus: 2, rate_gbit_per_s: 24}]`, ""),
		`, senders: [{gpus: 1, rate_gbit_per_s: 8}]`, ""))
	if plain.HasSenderRates() || plain.SenderShare(a1, b1, 1) != 1 {
		t.Errorf("without tables: HasSenderRates %v, share %g; want false, 1", plain.HasSenderRates(), plain.SenderShare(a1, b1, 1))
	}
}

// A table is refused when its GPU counts do not rise, or a point is above
// the entry's whole rate; the error names the field.
func TestSendersTableErrors(t *testing.T) {
	const nicTable = `[{gpus: 1, rate_gbit_per_s: 16}, {gpus: 2, rate_gbit_per_s: 24}]`
	for _, tc := range []struct {
		name, old, table, path, want string
	}{
		{"zero GPUs", nicTable, `[{gpus: 0, rate_gbit_per_s: 8}]`, "clusters[0].nics[0].senders[0].gpus", "must be 1..64, got 0"},
		{"not rising", nicTable, `[{gpus: 2, rate_gbit_per_s: 8}, {gpus: 2, rate_gbit_per_s: 9}]`, "clusters[0].nics[0].senders[1].gpus", "must rise from entry to entry, got 2 after 2"},
		{"above the NIC", nicTable, `[{gpus: 1, rate_gbit_per_s: 50}]`, "clusters[0].nics[0].senders[0].rate_gbit_per_s", "50 is above the entry's whole rate 48 Gbit/s"},
		{"no rate", nicTable, `[{gpus: 1}]`, "clusters[0].nics[0].senders[0].rate_gbit_per_s", "got 0"},
		{"above the link", `[{gpus: 1, rate_gbit_per_s: 8}]`, `[{gpus: 1, rate_gbit_per_s: 41}]`, "links[0].senders[0].rate_gbit_per_s", "41 is above the entry's whole rate 40 Gbit/s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(strings.Replace(sendersDoc, tc.old, tc.table, 1)))
			if err == nil || !strings.Contains(err.Error(), tc.path) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one naming %s: %q", err, tc.path, tc.want)
			}
		})
	}
}
