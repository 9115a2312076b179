// Package ordered gives strict, per-group FIFO delivery over a queue that is
// at-least-once and not FIFO, such as an Alibaba Cloud MNS standard queue.
//
// The sender tags each message with its group, the sender's epoch and a
// sequence id; the receiver buffers early arrivals, hands messages to the
// application strictly in sequence order (one at a time per group, groups in
// parallel), deletes redelivered duplicates in the background, and persists
// its cursor in a seqstore.Store.
//
// TODO: sections # Ordering guarantees, # Delivery modes, # Errors, # Shutdown.
package ordered
