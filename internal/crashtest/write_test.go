package crashtest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// writeHistories writes hs as files of dir, as the worker would.
func writeHistories(dir string, hs []*History) error {
	for i, h := range hs {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("h%03d.jsonl", i)))
		if err != nil {
			return err
		}
		enc := json.NewEncoder(f)
		for _, ev := range h.Events {
			if err := enc.Encode(ev); err != nil {
				f.Close()
				return err
			}
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	return nil
}
