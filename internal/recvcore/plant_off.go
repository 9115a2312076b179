//go:build !inorder_plant

package recvcore

const plantNoDedup, plantUnsorted = false, false
