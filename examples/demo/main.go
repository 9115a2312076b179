// Command demo shows inorder restoring strict per-group order over a queue
// that does not keep it. It is the README's first command.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Println("inorder demo: not built yet (ordered.Queue lands with the next issue)")
	os.Exit(0)
}
