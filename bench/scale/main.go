// Command scale writes the scale benchmark's generated clusters as cluster
// files, for timing the built binary on them (run.sh).
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	out := flag.String("out", ".", "directory to write KIND-SIZE.yaml files into")
	kind := flag.String("kind", "three-islands", "homogeneous, three-islands or measured-matrix")
	hosts := flag.Int("hosts", 128, "hosts (8 GPUs each)")
	flag.Parse()
	if err := write(*out, *kind, *hosts); err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		os.Exit(2)
	}
}

func write(dir, kind string, hosts int) error {
	f, err := Generate(kind, hosts)
	if err != nil {
		return err
	}
	data, err := f.Marshal()
	if err != nil {
		return err
	}
	path := filepath.Join(dir, fmt.Sprintf("%s-%d.yaml", kind, hosts))
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	fmt.Println(path)
	return nil
}
