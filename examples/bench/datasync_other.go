//go:build !linux

package main

import "os"

// datasync makes the data written to f durable.
func datasync(f *os.File) error { return f.Sync() }
