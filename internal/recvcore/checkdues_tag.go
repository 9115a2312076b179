//go:build inorder_checkdues

package recvcore

// Built with -tags inorder_checkdues (review 12), every Core checks at each
// Ready and Deadline that the lanes Ready skipped had nothing to do and
// that the commit and delete lanes' kept due times are current (see
// checkDues): the shell's tests (ordered) run with the checks that way,
//
//	go test -race -tags inorder_checkdues ./ordered/
//
// and a stale due time or a wrongly skipped lane panics there too.
func init() { checkDues = true }
