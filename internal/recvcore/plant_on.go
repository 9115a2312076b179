//go:build inorder_plant

package recvcore

import "os"

var (
	plantNoDedup  = os.Getenv("INORDER_PLANT") == plantNoDedupName
	plantUnsorted = os.Getenv("INORDER_PLANT") == plantUnsortedName
)
