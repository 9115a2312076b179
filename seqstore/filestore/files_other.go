//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package filestore

import "io/fs"

// oNoFollow is 0 where the open flag does not exist; the store does not
// open there anyway (see lockFile).
const oNoFollow = 0

// oNonBlock is 0 here too.
const oNonBlock = 0

func checkPrivate(fs.FileInfo) error { return nil }
