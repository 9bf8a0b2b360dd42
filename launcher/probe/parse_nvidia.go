package probe

import (
	"bufio"
	"encoding/csv"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// GPU is one GPU as nvidia-smi reports it.
type GPU struct {
	Index     int    `json:"index"`
	Name      string `json:"name"`
	MemoryMiB int    `json:"memory_mib"`
	BusID     string `json:"bus_id"`
	// PCIeGenMax is the GPU's PCIe generation (pcie.link.gen.max); 0 when
	// nvidia-smi reports [N/A] or the column is absent.
	PCIeGenMax int `json:"pcie_gen_max,omitempty"`
}

// GPUQueryFields is the --query-gpu list the probe asks for; ParseGPUQuery
// reads its noheader,nounits form and also the header form nvidia-smi prints
// without noheader (columns found by name, units such as " MiB" dropped).
const GPUQueryFields = "index,name,memory.total,pci.bus_id,pcie.link.gen.max"

// requiredGPUFields must be in a header; the rest are optional.
var requiredGPUFields = []string{"index", "name", "memory.total", "pci.bus_id"}

// ParseGPUQuery parses `nvidia-smi --query-gpu=GPUQueryFields
// --format=csv[,noheader][,nounits]`. Without a header the columns are taken
// in GPUQueryFields order; pcie.link.gen.max may be missing.
func ParseGPUQuery(out string) ([]GPU, error) {
	r := csv.NewReader(strings.NewReader(strings.TrimSpace(out)))
	r.TrimLeadingSpace = true
	r.FieldsPerRecord = -1
	r.LazyQuotes = true // a warning line may carry a stray quote
	rows, err := r.ReadAll()
	if err != nil {
		return nil, fmt.Errorf("nvidia-smi --query-gpu output: %w", err)
	}
	col := map[string]int{}
	for i, f := range strings.Split(GPUQueryFields, ",") {
		col[f] = i
	}
	if len(rows) > 0 && isGPUQueryHeader(rows[0]) {
		col = map[string]int{}
		for i, h := range rows[0] {
			// "memory.total [MiB]" names the column memory.total.
			name, _, _ := strings.Cut(h, " [")
			col[strings.TrimSpace(name)] = i
		}
		for _, want := range requiredGPUFields {
			if _, ok := col[want]; !ok {
				return nil, fmt.Errorf("nvidia-smi --query-gpu output: no %q column in header", want)
			}
		}
		rows = rows[1:]
	}
	var gpus []GPU
	var skipped []string
	for n, row := range rows {
		if len(row) == 1 && strings.TrimSpace(row[0]) == "" {
			continue
		}
		if !isGPURow(row, col) {
			// nvidia-smi prints warnings ("WARNING: infoROM is corrupted
			// at gpu ...") among the rows, exit status 0: not a GPU.
			skipped = append(skipped, strings.Join(row, ","))
			continue
		}
		g, err := gpuFromRow(row, col)
		if err != nil {
			return nil, fmt.Errorf("nvidia-smi --query-gpu output, row %d: %w", n+1, err)
		}
		gpus = append(gpus, g)
	}
	if len(gpus) == 0 && len(skipped) > 0 {
		// Only messages: say so rather than report a host without GPUs.
		return nil, fmt.Errorf("nvidia-smi --query-gpu output has no GPU rows (no numeric index); it said %q", skipped[0])
	}
	return gpus, nil
}

// isGPURow reports whether a row starts like a GPU's: a numeric index.
func isGPURow(row []string, col map[string]int) bool {
	i, ok := col["index"]
	if !ok || i >= len(row) {
		return false
	}
	_, err := strconv.Atoi(strings.TrimSpace(row[i]))
	return err == nil
}

func isGPUQueryHeader(row []string) bool {
	for _, f := range row {
		if f == "index" || f == "name" {
			return true
		}
	}
	return false
}

func gpuFromRow(row []string, col map[string]int) (GPU, error) {
	field := func(name string) (string, error) {
		i := col[name]
		if i >= len(row) {
			return "", fmt.Errorf("missing %s (have %d fields)", name, len(row))
		}
		return strings.TrimSpace(row[i]), nil
	}
	var g GPU
	idx, err := field("index")
	if err != nil {
		return g, err
	}
	if g.Index, err = strconv.Atoi(idx); err != nil {
		return g, fmt.Errorf("index %q is not a number", idx)
	}
	if g.Name, err = field("name"); err != nil {
		return g, err
	}
	mem, err := field("memory.total")
	if err != nil {
		return g, err
	}
	mem = strings.TrimSpace(strings.TrimSuffix(mem, "MiB"))
	if g.MemoryMiB, err = strconv.Atoi(mem); err != nil {
		return g, fmt.Errorf("memory.total %q is not a number of MiB", mem)
	}
	if g.BusID, err = field("pci.bus_id"); err != nil {
		return g, err
	}
	if _, ok := col["pcie.link.gen.max"]; ok {
		if gen, err := field("pcie.link.gen.max"); err == nil {
			g.PCIeGenMax, _ = strconv.Atoi(gen) // "[N/A]" stays 0
		}
	}
	return g, nil
}

var gpuListLine = regexp.MustCompile(`^GPU (\d+): (.+?) \(UUID: ([^)]*)\)`)

// GPUListEntry is one line of `nvidia-smi -L`.
type GPUListEntry struct {
	Index int
	Name  string
	UUID  string
}

// ParseGPUList parses `nvidia-smi -L`. MIG device lines (indented) are
// skipped: they belong to the GPU above them.
func ParseGPUList(out string) ([]GPUListEntry, error) {
	var gpus []GPUListEntry
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t") {
			continue
		}
		m := gpuListLine.FindStringSubmatch(line)
		if m == nil {
			return nil, fmt.Errorf("nvidia-smi -L output: unexpected line %q", line)
		}
		idx, _ := strconv.Atoi(m[1])
		gpus = append(gpus, GPUListEntry{Index: idx, Name: m[2], UUID: m[3]})
	}
	return gpus, nil
}

var ansiEscape = regexp.MustCompile("\x1b\\[[0-9;]*[A-Za-z]")

// StripANSI removes terminal escape sequences such as the underline that
// `nvidia-smi topo -m` puts around its header row.
func StripANSI(s string) string { return ansiEscape.ReplaceAllString(s, "") }

// Topology is the matrix of `nvidia-smi topo -m`: the connection type
// (X, NV#, PIX, PXB, PHB, NODE, SYS) between GPUs and NICs.
type Topology struct {
	// Devices are the matrix's row/column names in order (GPU0, NIC0, mlx5_0 ...).
	Devices []string
	// Link[a][b] is the connection between devices a and b.
	Link map[string]map[string]string
	// CPUAffinity and NUMAAffinity per GPU, as printed.
	CPUAffinity  map[string]string
	NUMAAffinity map[string]string
	// NICNames maps NIC# to the RDMA device name from the "NIC Legend".
	NICNames map[string]string
}

// ParseTopology parses `nvidia-smi topo -m`.
func ParseTopology(out string) (*Topology, error) {
	lines := strings.Split(StripANSI(out), "\n")
	t := &Topology{
		Link:         map[string]map[string]string{},
		CPUAffinity:  map[string]string{},
		NUMAAffinity: map[string]string{},
		NICNames:     map[string]string{},
	}
	header := -1
	for i, l := range lines {
		if strings.TrimSpace(l) != "" {
			header = i
			break
		}
	}
	if header < 0 {
		return nil, fmt.Errorf("nvidia-smi topo -m output: empty")
	}
	cols := splitTabs(lines[header])
	for _, c := range cols {
		if isAffinityColumn(c) {
			break
		}
		t.Devices = append(t.Devices, c)
	}
	if len(t.Devices) == 0 {
		return nil, fmt.Errorf("nvidia-smi topo -m output: no device columns in header %q", lines[header])
	}
	known := map[string]bool{}
	for _, d := range t.Devices {
		known[d] = true
	}
	inLegend := false
	for _, l := range lines[header+1:] {
		trimmed := strings.TrimSpace(l)
		switch {
		case trimmed == "":
			continue
		case strings.HasPrefix(trimmed, "NIC Legend"):
			inLegend = true
			continue
		case strings.HasPrefix(trimmed, "Legend"):
			inLegend = false
			continue
		}
		if inLegend {
			// "  NIC0: mlx5_0"
			if k, v, ok := strings.Cut(trimmed, ":"); ok {
				t.NICNames[strings.TrimSpace(k)] = strings.TrimSpace(v)
			}
			continue
		}
		fields := strings.Split(l, "\t")
		row := strings.TrimSpace(fields[0])
		if !known[row] {
			continue
		}
		t.Link[row] = map[string]string{}
		for j, d := range t.Devices {
			if j+1 < len(fields) {
				t.Link[row][d] = strings.TrimSpace(fields[j+1])
			}
		}
		rest := fields[min(len(t.Devices)+1, len(fields)):]
		if v := firstNonEmpty(rest, 0); v != "" {
			t.CPUAffinity[row] = v
		}
		if v := firstNonEmpty(rest, 1); v != "" {
			t.NUMAAffinity[row] = v
		}
	}
	return t, nil
}

func isAffinityColumn(c string) bool {
	return strings.Contains(c, "Affinity") || strings.Contains(c, "NUMA ID")
}

func splitTabs(l string) []string {
	var out []string
	for _, f := range strings.Split(l, "\t") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// firstNonEmpty returns the n-th (0-based) non-empty field.
func firstNonEmpty(fields []string, n int) string {
	for _, f := range fields {
		if f = strings.TrimSpace(f); f != "" {
			if n == 0 {
				return f
			}
			n--
		}
	}
	return ""
}

// topoRank orders connection types from closest to farthest.
var topoRank = map[string]int{"X": 0, "NV": 1, "PIX": 2, "PXB": 3, "PHB": 4, "NODE": 5, "SYS": 6}

func linkRank(s string) int {
	if strings.HasPrefix(s, "NV") {
		return topoRank["NV"]
	}
	if r, ok := topoRank[s]; ok {
		return r
	}
	return len(topoRank)
}

// NearestNICs returns, for every GPU, the RDMA devices with the closest
// connection in the matrix (NIC# resolved through the NIC Legend).
func (t *Topology) NearestNICs() map[string][]string {
	out := map[string][]string{}
	for _, g := range t.Devices {
		if !strings.HasPrefix(g, "GPU") {
			continue
		}
		best := len(topoRank) + 1
		var nics []string
		for _, n := range t.Devices {
			if strings.HasPrefix(n, "GPU") {
				continue
			}
			r := linkRank(t.Link[g][n])
			name := n
			if real, ok := t.NICNames[n]; ok {
				name = real
			}
			switch {
			case r < best:
				best, nics = r, []string{name}
			case r == best:
				nics = append(nics, name)
			}
		}
		if len(nics) > 0 {
			out[g] = nics
		}
	}
	return out
}
