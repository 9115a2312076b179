package mnsqueue

import (
	"context"
	"errors"
	"fmt"
	"testing"

	ali_mns "github.com/aliyun/aliyun-mns-go-sdk"
	gerrors "github.com/gogap/errors"
	"github.com/stretchr/testify/assert"

	"github.com/inorder/inorder/ordered/driver"
)

// TestClassify checks the mapping of SDK errors, built from the SDK's own
// templates, to sentinels and retryability.
func TestClassify(t *testing.T) {
	sdkErr := func(tpl gerrors.ErrCodeTemplate, code string) error {
		return tpl.New(gerrors.Params{"resp": ali_mns.ErrorResponse{Code: code, Message: "m"}, "resource": "queues/q/messages", "err": "e"})
	}
	tests := []struct {
		name      string
		err       error
		kind      opKind
		sentinel  error // nil: none of driver's receipt or queue sentinels
		retryable bool
	}{
		{"network", sdkErr(ali_mns.ERR_SEND_REQUEST_FAILED, ""), opOther, nil, true},
		{"body unreadable", sdkErr(ali_mns.ERR_READ_RESPONSE_BODY_FAILED, ""), opOther, nil, true},
		{"error answer not XML", sdkErr(ali_mns.ERR_UNMARSHAL_ERROR_RESPONSE_FAILED, ""), opOther, nil, true},
		{"answer not XML", sdkErr(ali_mns.ERR_UNMARSHAL_RESPONSE_FAILED, ""), opOther, nil, true},
		{"internal error", sdkErr(ali_mns.ERR_MNS_INTERNAL_ERROR, "InternalError"), opOther, nil, true},
		{"qps limit", sdkErr(ali_mns.ERR_MNS_QPS_LIMIT_EXCEEDED, "QpsLimitExceeded"), opOther, driver.ErrThrottled, true},
		{"too many requests", sdkErr(ali_mns.ERR_MNS_UNKNOWN_CODE, "TooManyRequests"), opOther, driver.ErrThrottled, true},
		{"too many requests on delete", sdkErr(ali_mns.ERR_MNS_UNKNOWN_CODE, "TooManyRequests"), opReceipt, driver.ErrThrottled, true},
		{"unknown 5xx code", sdkErr(ali_mns.ERR_MNS_UNKNOWN_CODE, "InternalServerError"), opOther, nil, true},
		{"unknown code", sdkErr(ali_mns.ERR_MNS_UNKNOWN_CODE, "FifoMissingMessageGroupId"), opOther, nil, false},
		{"invalid argument", sdkErr(ali_mns.ERR_MNS_INVALID_ARGUMENT, "InvalidArgument"), opOther, nil, false},
		{"malformed xml", sdkErr(ali_mns.ERR_MNS_MALFORMED_XML, "MalformedXML"), opOther, nil, false},
		{"signature", sdkErr(ali_mns.ERR_MNS_SIGNATURE_DOES_NOT_MATCH, "SignatureDoesNotMatch"), opOther, nil, false},
		{"access denied", sdkErr(ali_mns.ERR_MNS_ACCESS_DENIED, "AccessDenied"), opOther, nil, false},
		{"not exist on receive", sdkErr(ali_mns.ERR_MNS_MESSAGE_NOT_EXIST, "MessageNotExist"), opOther, nil, false},
		{"not exist on delete", sdkErr(ali_mns.ERR_MNS_MESSAGE_NOT_EXIST, "MessageNotExist"), opReceipt, driver.ErrStaleReceipt, false},
		{"bad receipt", sdkErr(ali_mns.ERR_MNS_RECEIPT_HANDLE_ERROR, "ReceiptHandleError"), opReceipt, driver.ErrBadReceipt, false},
		{"queue not exist", sdkErr(ali_mns.ERR_MNS_QUEUE_NOT_EXIST, "QueueNotExist"), opOther, driver.ErrQueueNotFound, false},
		{"not an SDK error", errors.New("credential refresh failed"), opOther, nil, false},
	}
	sentinels := []error{driver.ErrStaleReceipt, driver.ErrBadReceipt, driver.ErrQueueNotFound, driver.ErrClosed, driver.ErrTooLarge, driver.ErrThrottled}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := classify("Op", tc.kind, tc.err)
			assert.Equal(t, tc.retryable, isRetryable(e), "isRetryable(%v)", e)
			assert.Equal(t, tc.retryable, isRetryable(fmt.Errorf("wrapped: %w", e)), "isRetryable of a wrapped %v", e)
			for _, s := range sentinels {
				assert.Equal(t, s == tc.sentinel, errors.Is(e, s), "errors.Is(%v, %v)", e, s)
			}
			assert.ErrorIs(t, e, tc.err, "the original error must stay reachable")
			if sdkCode(tc.err) != 0 {
				var c sdkCoded
				assert.True(t, errors.As(e, &c), "errors.As to the SDK's coded error")
				assert.Equal(t, fmt.Sprintf("MNS#%d", c.Code()), e.Code, "Error.Code")
			}
		})
	}
}

// TestEntryError checks the classification of per-entry failures of a batch.
func TestEntryError(t *testing.T) {
	tests := []struct {
		code      string
		kind      opKind
		sentinel  error
		retryable bool
	}{
		{CodeInternalError, opOther, nil, true},
		{CodeQPSLimitExceeded, opOther, driver.ErrThrottled, true},
		{CodeTooManyRequests, opReceipt, driver.ErrThrottled, true},
		{"InvalidArgument", opOther, nil, false},
		{CodeMessageNotExist, opReceipt, driver.ErrStaleReceipt, false},
		{CodeReceiptHandleError, opReceipt, driver.ErrBadReceipt, false},
		{CodeQueueNotExist, opOther, driver.ErrQueueNotFound, false},
	}
	for _, tc := range tests {
		e := entryError("Op", tc.kind, tc.code, "msg")
		assert.Equal(t, tc.retryable, isRetryable(e), "entry code %s: retryable", tc.code)
		if tc.sentinel != nil {
			assert.ErrorIs(t, e, tc.sentinel, "entry code %s", tc.code)
		}
		assert.Equal(t, tc.code, e.Code, "Error.Code")
	}
}

func TestIsRetryableBatch(t *testing.T) {
	retry := entryError("Op", opOther, CodeInternalError, "")
	final := entryError("Op", opReceipt, CodeMessageNotExist, "")
	assert.True(t, isRetryable(&driver.BatchError{Errs: []error{retry, nil, retry}}), "every failed entry retryable")
	assert.False(t, isRetryable(&driver.BatchError{Errs: []error{retry, final}}), "one failed entry final")
	assert.False(t, isRetryable(&driver.BatchError{Errs: []error{nil}}), "no failed entry")
	assert.False(t, isRetryable(fmt.Errorf("x: %w", context.Canceled)), "context error")
	ce := classify("Op", opOther, ali_mns.ERR_SEND_REQUEST_FAILED.New(gerrors.Params{"err": "eof"}))
	assert.False(t, isRetryable(errors.Join(ce, driver.ErrClosed)), "an error that also wraps ErrClosed")
}
