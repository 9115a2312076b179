package mnsqueue

import (
	"context"
	"strings"

	ali_mns "github.com/aliyun/aliyun-mns-go-sdk"
)

// SubscriptionInfo is a subscription of a topic, as the service lists it.
type SubscriptionInfo struct {
	// Name is the subscription's name.
	Name string
	// Endpoint is where the service pushes, as stored.
	Endpoint string
	// Queue is the queue a queue endpoint
	// ("acs:mns:{region}:{account}:queues/{name}") names, when it is in
	// the topic's own region and account; "" for other endpoints (a queue
	// of another account or region among them).
	Queue string
	// FilterTag limits the pushes to publishes with this MessageTag; ""
	// means every publish.
	FilterTag string
	// Format is the notify content format (FormatSimplified, FormatXML,
	// FormatJSON).
	Format string
}

// listPage is how many subscriptions one listing request asks for (the
// service allows 1..1000; a topic has at most 100 subscriptions).
const listPage = 100

// ListSubscriptions lists the subscriptions of the topic with their
// settings, in the service's order (by name).
func ListSubscriptions(ctx context.Context, endpoint string, cred Credentials, topic string) ([]SubscriptionInfo, error) {
	var out []SubscriptionInfo
	err := admin(ctx, endpoint, cred, "topic", topic, "ListSubscriptionDetailByTopic", func(c ali_mns.MNSClient) error {
		t := ali_mns.NewMNSTopic(topic, c)
		own := t.GenerateQueueEndpoint("") // "acs:mns:{region}:{account}:queues/"
		marker := ""
		for {
			page, err := t.ListSubscriptionDetailByTopic(marker, listPage, "")
			if err != nil {
				return classify("ListSubscriptionDetailByTopic", opOther, err)
			}
			for _, a := range page.Attrs {
				out = append(out, SubscriptionInfo{Name: a.SubscriptionName, Endpoint: a.Endpoint, Queue: endpointQueue(a.Endpoint, own),
					FilterTag: a.FilterTag, Format: string(a.NotifyContentFormat)})
			}
			if page.NextMarker == "" || len(page.Attrs) == 0 {
				return nil
			}
			marker = page.NextMarker
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// endpointQueue returns the queue name of a queue endpoint that starts
// with own (this account's and region's queue endpoints), else "".
func endpointQueue(ep, own string) string {
	q, ok := strings.CutPrefix(ep, own)
	if !ok || !strings.HasPrefix(own, "acs:mns:") || strings.Contains(q, "/") {
		return ""
	}
	return q
}
