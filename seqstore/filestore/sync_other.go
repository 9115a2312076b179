//go:build !linux

package filestore

import "os"

// syncData makes the data written to f durable.
func syncData(f *os.File) error { return f.Sync() }
