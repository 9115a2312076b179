package mnsqueue

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/inorder/inorder/ordered/driver"
)

// ErrInvalidBody means a body cannot be sent in raw mode (Options.Raw): it is
// not valid UTF-8 or holds characters that XML does not allow.
var ErrInvalidBody = errors.New("mnsqueue: body is not valid XML text (raw mode)")

// ErrQueueType: the queue is not of the type Options.QueueType names.
var ErrQueueType = errors.New("mnsqueue: queue type mismatch")

// Service error codes the driver classifies, as the service spells them.
const (
	CodeMessageNotExist    = "MessageNotExist"
	CodeReceiptHandleError = "ReceiptHandleError"
	CodeQueueNotExist      = "QueueNotExist"
	CodeInternalError      = "InternalError"
	CodeQPSLimitExceeded   = "QpsLimitExceeded"
	CodeTooManyRequests    = "TooManyRequests"
)

// SDK error codes (namespace "MNS") of github.com/aliyun/aliyun-mns-go-sdk.
const (
	sdkSendFailed         = 5   // transport error: network, timeout, refused
	sdkReadBodyFailed     = 6   // response body unreadable
	sdkBadErrorResponse   = 7   // error answer that is not <Error> XML
	sdkBadResponse        = 8   // success answer that does not decode
	sdkInternalError      = 102 // InternalError
	sdkMessageNotExist    = 115 // MessageNotExist
	sdkQueueExists        = 116 // QueueAlreadyExist: exists with other attributes
	sdkQueueNotExist      = 122 // QueueNotExist
	sdkReceiptHandleError = 123 // ReceiptHandleError
	sdkSameAttributes     = 133 // CreateQueue answered 204: exists with the same attributes
	sdkQPSLimit           = 134 // QpsLimitExceeded
	sdkUnknownCode        = 135 // a service code the SDK does not map
	sdkBatchFailed        = 136 // some entries of a batch failed
	sdkTopicNotExist      = 202 // TopicNotExist
	sdkTopicExists        = 203 // TopicAlreadyExist: exists with other attributes
	sdkSubscriptionExists = 206 // SubscriptionAlreadyExist: exists with other attributes
	sdkTopicSameAttrs     = 209 // CreateTopic answered 204: exists with the same attributes
	sdkSubSameAttrs       = 210 // Subscribe answered 204: exists with the same attributes
)

// sdkCoded is what the SDK's errors (github.com/gogap/errors) implement.
type sdkCoded interface {
	error
	Code() uint64
	Namespace() string
}

// sdkCode returns the SDK code of err, or 0 when err is not an SDK error.
func sdkCode(err error) uint64 {
	var c sdkCoded
	if errors.As(err, &c) && c.Namespace() == "MNS" {
		return c.Code()
	}
	return 0
}

// Error is a failed call. It wraps the SDK's error (reach it with errors.As
// and an interface{ Code() uint64; Namespace() string }) and, when the
// failure has a meaning for the portable layer, a sentinel of package driver
// (ErrStaleReceipt, ErrBadReceipt, ErrQueueNotFound, ErrThrottled).
type Error struct {
	// Op is the driver method or SDK operation that failed.
	Op string
	// Code is the service's error code (MessageNotExist, ...) for a
	// per-entry failure of a batch, or "MNS#<n>" for an SDK error.
	Code string
	// Err is the underlying error: the SDK's, or a description of a batch
	// entry's failure.
	Err error

	sentinel  error
	retryable bool
}

func (e *Error) Error() string {
	if e.sentinel != nil {
		return fmt.Sprintf("mnsqueue: %s: %v: %v", e.Op, e.sentinel, e.Err)
	}
	return fmt.Sprintf("mnsqueue: %s: %v", e.Op, e.Err)
}

// Unwrap returns the sentinel, if any, and the underlying error.
func (e *Error) Unwrap() []error {
	if e.sentinel != nil {
		return []error{e.sentinel, e.Err}
	}
	return []error{e.Err}
}

// Retryable reports whether the same call may succeed later.
func (e *Error) Retryable() bool { return e.retryable }

// opKind tells classify what MessageNotExist means for the operation.
type opKind int

const (
	opOther   opKind = iota
	opReceipt        // delete or change visibility: MessageNotExist is a stale receipt
)

// classify wraps an SDK error of op.
func classify(op string, kind opKind, err error) *Error {
	e := &Error{Op: op, Err: err}
	code := sdkCode(err)
	if code != 0 {
		e.Code = fmt.Sprintf("MNS#%d", code)
	}
	switch code {
	case sdkSendFailed, sdkReadBodyFailed, sdkBadErrorResponse, sdkBadResponse, sdkInternalError:
		e.retryable = true
	case sdkQPSLimit:
		e.retryable, e.sentinel = true, driver.ErrThrottled
	case sdkMessageNotExist:
		if kind == opReceipt {
			e.sentinel = driver.ErrStaleReceipt
		}
	case sdkQueueNotExist, sdkTopicNotExist:
		e.sentinel = driver.ErrQueueNotFound
	case sdkReceiptHandleError:
		e.sentinel = driver.ErrBadReceipt
	case sdkUnknownCode:
		// Codes the SDK does not know: the service's 5xx family is
		// transient, and 429 TooManyRequests (today's throttling answer,
		// which the SDK's table predates) is throttling.
		msg := err.Error()
		switch {
		case strings.Contains(msg, "code: "+CodeTooManyRequests+","):
			e.retryable, e.sentinel = true, driver.ErrThrottled
		default:
			e.retryable = strings.Contains(msg, "code: InternalServerError,") || strings.Contains(msg, "code: ServiceUnavailable,")
		}
	}
	return e
}

// entryError builds the error of one failed entry of a batch, from the code
// and message the service gave for it.
func entryError(op string, kind opKind, code, message string) *Error {
	e := &Error{Op: op, Code: code, Err: fmt.Errorf("service error %s: %s", code, message)}
	switch code {
	case CodeInternalError, "InternalServerError", "ServiceUnavailable":
		e.retryable = true
	case CodeQPSLimitExceeded, CodeTooManyRequests:
		e.retryable, e.sentinel = true, driver.ErrThrottled
	case CodeMessageNotExist:
		if kind == opReceipt {
			e.sentinel = driver.ErrStaleReceipt
		}
	case CodeQueueNotExist:
		e.sentinel = driver.ErrQueueNotFound
	case CodeReceiptHandleError:
		e.sentinel = driver.ErrBadReceipt
	}
	return e
}

// isRetryable implements driver.Queue.IsRetryable.
func isRetryable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, driver.ErrClosed) {
		return false
	}
	var be *driver.BatchError
	if errors.As(err, &be) {
		// The whole call may be made again when every failed entry is transient.
		n := 0
		for _, e := range be.Errs {
			if e != nil {
				if !isRetryable(e) {
					return false
				}
				n++
			}
		}
		return n > 0
	}
	var e *Error
	return errors.As(err, &e) && e.retryable
}
