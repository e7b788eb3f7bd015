//! `Native.clientMetrics` / `clientMetricFamilies`: core's snapshot and its metric families as core's JSON, which
//! `dev.fencelock.MetricsJson` turns into records; no mapping is made here.

use fencelock::Client;

use crate::handle::getter;

getter!(Java_dev_fencelock_Native_clientMetrics, Client, |c| -> String c.metrics().to_json());

getter!(Java_dev_fencelock_Native_clientMetricFamilies, Client, |c| -> String {
    fencelock::metrics::families_json(&c.metrics().families())
});
