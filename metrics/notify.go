package metrics

import "github.com/prometheus/client_golang/prometheus"

// Delivery results, the result labels of
// vigil_notification_deliveries_total (docs/notifications.md).
const (
	// DeliveryDelivered: the receiver answered 2xx.
	DeliveryDelivered = "delivered"
	// DeliveryFailed: an attempt failed; the notification waits its back-off.
	DeliveryFailed = "failed"
	// DeliveryDead: an attempt failed at --notify-max-age; the
	// notification is dead-lettered.
	DeliveryDead = "dead"
)

// DeliveryResults are the result labels, each exposed at 0 from the start.
func DeliveryResults() []string { return []string{DeliveryDelivered, DeliveryFailed, DeliveryDead} }

// NotifyMetrics are the collectors of notification delivery and SLA
// misses, set by the leader's notify services.
type NotifyMetrics struct {
	// Deliveries counts delivery attempts by result (DeliveryResults).
	Deliveries *prometheus.CounterVec
	// OldestPending is the age in seconds of the oldest pending
	// notification, by the database clock, set by every delivery pass of
	// the leader (0 when none is pending). A follower keeps the value of
	// its last term: read it where vigil_leader is 1.
	OldestPending prometheus.Gauge
	// SLAMisses counts runs that missed their DAG's sla.
	SLAMisses prometheus.Counter
}

func newNotifyMetrics() NotifyMetrics {
	return NotifyMetrics{
		Deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vigil_notification_deliveries_total",
			Help: "Webhook delivery attempts, by result (delivered, failed, dead).",
		}, []string{"result"}),
		OldestPending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "vigil_notification_oldest_pending_seconds",
			Help: "Age of the oldest pending notification, set by the leader (0 when none).",
		}),
		SLAMisses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "vigil_sla_missed_total", Help: "Runs not finished by their DAG's sla.",
		}),
	}
}

// register adds the collectors to r, every result label from zero.
func (n NotifyMetrics) register(r *prometheus.Registry) {
	r.MustRegister(n.Deliveries, n.OldestPending, n.SLAMisses)
	for _, res := range DeliveryResults() {
		n.Deliveries.WithLabelValues(res)
	}
}
