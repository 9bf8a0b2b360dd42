package search

import (
	"encoding/csv"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestVTrainRowsMatchSource checks vtrain_a100.tsv against vTrain's CSV,
// kept unchanged beside it (VIA-Research/vTrain data/ground_truth_multi.csv
// at f8dda8473a48b373b1d25f51f52d685bff5150c5): one table row per CSV row,
// in order, with the CSV's shape, parallel sizes, batches and time.
func TestVTrainRowsMatchSource(t *testing.T) {
	raw, err := os.ReadFile("testdata/published/vtrain_ground_truth_multi.csv")
	if err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(strings.NewReader(strings.TrimPrefix(string(raw), "\ufeff"))).ReadAll()
	if err != nil {
		t.Fatalf("vTrain CSV: %v", err)
	}
	recs = recs[1:] // header
	rows := loadPublished(t, "testdata/published/vtrain_a100.tsv")
	if len(rows) != len(recs) {
		t.Fatalf("%d table rows, %d CSV rows", len(rows), len(recs))
	}
	for i, rec := range recs {
		v := make([]float64, len(rec))
		for j, s := range rec {
			if v[j], err = strconv.ParseFloat(strings.TrimSpace(s), 64); err != nil {
				t.Fatalf("CSV row %d column %d: %v", i+2, j+1, err)
			}
		}
		r := rows[i]
		// GPUs, global batch, micro batch, hidden, heads, layers, sequence, TP, DP, PP
		got := []int{r.gpus, r.cfg.GlobalBatch, r.cfg.MicroBatch, r.m.Hidden, r.m.Heads, r.m.NumLayers, r.m.SeqLength, r.cfg.TP, r.cfg.DP, r.cfg.PP}
		for j, g := range got {
			if float64(g) != v[j+1] {
				t.Errorf("row %s (CSV row %d): column %d is %v in the CSV, %d in the table", r.name, i+2, j+2, v[j+1], g)
			}
		}
		if ms := v[11]; math.Abs(r.value*1000-ms) > 1e-6*ms {
			t.Errorf("row %s (CSV row %d): %g s, the CSV says %g ms", r.name, i+2, r.value, ms)
		}
	}
}
