package mnstest

import (
	"errors"
	"net/http"
	"strconv"
)

// Error codes the server answers with, as the MNS service spells them
// (InvalidDegist included). The SDK maps them to its own error values by
// code only; the HTTP status is what the service documents.
const (
	CodeAccessDenied                = "AccessDenied"
	CodeInvalidAccessKeyID          = "InvalidAccessKeyId"
	CodeInternalError               = "InternalError"
	CodeInvalidAuthorizationHeader  = "InvalidAuthorizationHeader"
	CodeInvalidArgument             = "InvalidArgument"
	CodeInvalidDigest               = "InvalidDegist"
	CodeInvalidRequestURL           = "InvalidRequestURL"
	CodeInvalidQueryString          = "InvalidQueryString"
	CodeMalformedXML                = "MalformedXML"
	CodeMissingAuthorizationHeader  = "MissingAuthorizationHeader"
	CodeMissingDateHeader           = "MissingDateHeader"
	CodeMissingVersionHeader        = "MissingVersionHeader"
	CodeMissingReceiptHandle        = "MissingReceiptHandle"
	CodeMissingVisibilityTimeout    = "MissingVisibilityTimeout"
	CodeMessageNotExist             = "MessageNotExist"
	CodeQueueAlreadyExist           = "QueueAlreadyExist"
	CodeInvalidQueueName            = "InvalidQueueName"
	CodeQueueNameLengthError        = "QueueNameLengthError"
	CodeQueueNotExist               = "QueueNotExist"
	CodeReceiptHandleError          = "ReceiptHandleError"
	CodeSignatureDoesNotMatch       = "SignatureDoesNotMatch"
	CodeTimeExpired                 = "TimeExpired"
	CodeTooManyRequests             = "TooManyRequests"
	CodeQpsLimitExceeded            = "QpsLimitExceeded"
	CodeTopicNotExist               = "TopicNotExist"
	CodeTopicAlreadyExist           = "TopicAlreadyExist"
	CodeTopicNameLengthError        = "TopicNameLengthError"
	CodeTopicNameInvalid            = "TopicNameInvalid"
	CodeSubscriptionNotExist        = "SubscriptionNotExist"
	CodeSubscriptionAlreadyExist    = "SubscriptionAlreadyExist"
	CodeSubscriptionNameLengthError = "SubscriptionNameLengthError"
	// CodeSubscriptionNameInvalid is the service's spelling; the Go SDK's
	// error table has "SubsriptionNameInvalid" and so maps it to MNS#135.
	CodeSubscriptionNameInvalid = "SubscriptionNameInvalid"
	CodeEndpointInvalid         = "EndpointInvalid"
	// CodeFifoMissingMessageGroupID answers a send or publish to a FIFO
	// queue or topic without a MessageGroupId (400), as the service
	// documents it.
	CodeFifoMissingMessageGroupID = "FifoMissingMessageGroupId"
	// CodeUnsupportedOperation answers PeekMessage and BatchPeekMessage on
	// a FIFO queue (400), which the service does not support; the code
	// is of our choosing, the service documents none.
	CodeUnsupportedOperation = "UnsupportedOperation"
	// Limits of the emulator, in codes of our choosing (see Options).
	CodeSubscriptionNumExceededLimit = "SubscriptionNumExceededLimit"
	CodeQueueNumExceededLimit        = "QueueNumExceededLimit"
	CodeTopicNumExceededLimit        = "TopicNumExceededLimit"
	CodeMessageNumExceededLimit      = "MessageNumExceededLimit"
)

// Sentinel errors of the Go API (CreateQueue, DeleteQueue, Queue, SetFaults).
var (
	// ErrClosed is returned by methods called after Close.
	ErrClosed = errors.New("mnstest: server closed")
	// ErrQueueNotExist means no queue has the given name.
	ErrQueueNotExist = errors.New("mnstest: queue does not exist")
	// ErrQueueExists means a queue of that name exists with other attributes.
	ErrQueueExists = errors.New("mnstest: queue already exists with other attributes")
	// ErrTopicNotExist means no topic has the given name.
	ErrTopicNotExist = errors.New("mnstest: topic does not exist")
	// ErrTopicExists means a topic of that name exists with other
	// attributes, ErrSubscriptionExists the same of a subscription.
	ErrTopicExists        = errors.New("mnstest: topic already exists with other attributes")
	ErrSubscriptionExists = errors.New("mnstest: subscription already exists with other attributes")
	// ErrInvalidArgument means a name, an attribute or an option is out of
	// the range the service accepts.
	ErrInvalidArgument = errors.New("mnstest: invalid argument")
	// ErrLimitExceeded means a cap of Options (MaxQueues, MaxTopics,
	// subscriptions per topic) is reached.
	ErrLimitExceeded = errors.New("mnstest: limit exceeded")
)

// apiError is an error answer: HTTP status, MNS code and message text.
type apiError struct {
	status  int
	code    string
	message string
}

func (e *apiError) Error() string {
	return "mnstest: " + strconv.Itoa(e.status) + " " + e.code + ": " + e.message
}

func newAPIError(status int, code, message string) *apiError {
	return &apiError{status: status, code: code, message: message}
}

// Errors answered often enough to be allocated once.
var (
	errMessageNotExist = newAPIError(http.StatusNotFound, CodeMessageNotExist, "Message not exist.")
	errQueueNotExist   = newAPIError(http.StatusNotFound, CodeQueueNotExist, "The queue name you provided is not exist.")
	errReceiptHandle   = newAPIError(http.StatusBadRequest, CodeReceiptHandleError, "The receipt handle you provide is not valid.")
	errMalformedXML    = newAPIError(http.StatusBadRequest, CodeMalformedXML, "The XML you provided was not well-formed.")
	errInternal        = newAPIError(http.StatusInternalServerError, CodeInternalError, "Interal error.")
	errQueueExists     = newAPIError(http.StatusConflict, CodeQueueAlreadyExist, "The queue you want to create is already exist.")
	errMissingVersion  = newAPIError(http.StatusBadRequest, CodeMissingVersionHeader, "x-mns-version header is required.")
	errMissingHandle   = newAPIError(http.StatusBadRequest, CodeMissingReceiptHandle, "ReceiptHandle is required.")
	errMissingVisTime  = newAPIError(http.StatusBadRequest, CodeMissingVisibilityTimeout, "VisibilityTimeout is required.")
	errBadURL          = newAPIError(http.StatusBadRequest, CodeInvalidRequestURL, "The request URL is not valid.")
	errTopicNotExist   = newAPIError(http.StatusNotFound, CodeTopicNotExist, "The topic you provided is not exist.")
	errTopicExists     = newAPIError(http.StatusConflict, CodeTopicAlreadyExist, "The topic you want to create is already exist.")
	errSubNotExist     = newAPIError(http.StatusNotFound, CodeSubscriptionNotExist, "The subscription you provided is not exist.")
	errSubExists       = newAPIError(http.StatusConflict, CodeSubscriptionAlreadyExist, "The subscription you want to create is already exist.")
	errEndpointInvalid = newAPIError(http.StatusBadRequest, CodeEndpointInvalid, "The endpoint you provided is not valid.")
	errTopicLimit      = newAPIError(http.StatusBadRequest, CodeTopicNumExceededLimit, "The number of topics exceeds the limit.")
	errSubLimit        = newAPIError(http.StatusBadRequest, CodeSubscriptionNumExceededLimit, "A topic has at most 100 subscriptions.")
	errQueueLimit      = newAPIError(http.StatusBadRequest, CodeQueueNumExceededLimit, "The number of queues exceeds the limit.")
	errMissingGroup    = newAPIError(http.StatusBadRequest, CodeFifoMissingMessageGroupID,
		"MessageGroupId is required for a message of a FIFO queue or topic.")
	errFifoPeek       = newAPIError(http.StatusBadRequest, CodeUnsupportedOperation, "A FIFO queue does not support PeekMessage.")
	errDeadLetterType = invalidArgument("The dead-letter queue must be of the queue's type: fifo for a fifo queue, normal for a normal queue.")
	errMessageLimit   = newAPIError(http.StatusBadRequest, CodeMessageNumExceededLimit,
		"The emulator holds as many messages as its MaxMessages or MaxMessageBytes allow.")
)

func invalidArgument(message string) *apiError {
	return newAPIError(http.StatusBadRequest, CodeInvalidArgument, message)
}

// rangeError is the service's wording for a value out of range.
func rangeError(element string, low, high int64, unit string) *apiError {
	return invalidArgument("The value of " + element + " should between " + strconv.FormatInt(low, 10) +
		" and " + strconv.FormatInt(high, 10) + " " + unit + ".")
}
