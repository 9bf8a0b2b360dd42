// Package diskcache keeps JSON entries in one private directory, one file
// per key: the on-disk cache behind `probe --measure` and the launch
// probe. Entries hold facts about a private cluster (host names,
// addresses, interfaces), so the directory is 0700 and each file 0600, and
// an entry is replaced atomically (internal/atomicfile).
package diskcache

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/pipette-launch/pipette-launch/internal/atomicfile"
)

// DirMode and FileMode are the modes of the cache directory and entries.
const (
	DirMode  os.FileMode = 0o700
	FileMode os.FileMode = 0o600
)

// Dir is a cache directory; it is created on the first Save.
type Dir string

// Path is where the entry named by kind and key lives: kind-HASH.json,
// HASH the first 16 hex digits of key's SHA-256, so any key (host names,
// addresses, ports) makes a plain file name.
func (d Dir) Path(kind, key string) string {
	sum := sha256.Sum256([]byte(key))
	return filepath.Join(string(d), kind+"-"+hex.EncodeToString(sum[:])[:16]+".json")
}

// Load decodes the entry into v. A missing, unreadable or corrupt entry
// is a miss (false), not an error: the caller measures again.
func (d Dir) Load(kind, key string, v any) bool {
	b, err := os.ReadFile(d.Path(kind, key))
	if err != nil {
		return false
	}
	return json.Unmarshal(b, v) == nil
}

// Save stores v as the entry, creating the directory (DirMode) if needed.
func (d Dir) Save(kind, key string, v any) error {
	if err := os.MkdirAll(string(d), DirMode); err != nil {
		return fmt.Errorf("cache %s: %w", d, err)
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("cache %s: %w", kind, err)
	}
	if err := atomicfile.Write(d.Path(kind, key), b, FileMode); err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	return nil
}
