//! The exporting half of setup: resource, pipeline, the one line on
//! stderr, then the install that cannot fail.

use super::builder::TelemetryBuilder;
use super::error::SetupError;
use super::handle::{take_over, teardown_globals, TelemetryHandle};
use super::signal;
use crate::api::groups::set_enabled_span_groups;
use crate::api::span;
use crate::config::plan::Plan;
use crate::engine::open;
use crate::host::resource::{self, Detect};
use crate::sdk::pipeline::{Inputs, Pipeline};
use crate::sdk::redact::{RedactingMeterProvider, Redactor};
use opentelemetry_sdk::Resource;
use std::sync::Arc;

impl TelemetryBuilder {
    pub(super) fn install_exporting(
        self,
        plan: Plan,
        generation: u64,
        run_id: String,
    ) -> Result<TelemetryHandle, SetupError> {
        let Plan {
            config: cfg,
            groups,
            otel: otel_env,
            ..
        } = plan;
        let cfg = &cfg;
        // before anything is touched (GPU detection included)
        crate::sdk::features::check(cfg).map_err(SetupError::exporter)?;
        let detect = Detect {
            // as set: an empty CUDA_VISIBLE_DEVICES means no GPU, not unset
            lookup: &crate::vars::raw,
            k8s_service_account_dir: self
                .k8s_dir
                .clone()
                .unwrap_or_else(|| resource::K8S_SERVICE_ACCOUNT_DIR.into()),
            // NVML only when GPU metrics are asked for
            use_nvml: cfg.gpu_metrics,
        };
        let mut attrs = resource::resource_attributes(
            cfg,
            &run_id,
            self.rank,
            self.world_size,
            &self.resource_attributes,
            &detect,
        );
        let redactor = Redactor::new(&cfg.redact_keys);
        redactor.redact_attributes(&mut attrs);
        let pipeline = Pipeline::build(Inputs {
            config: cfg,
            otel: &otel_env,
            rank: self.rank,
            run_id: &run_id,
            resource: Resource::builder_empty().with_attributes(attrs).build(),
            redactor: &redactor,
            span_processor: self.span_processor,
            metric_reader: self.metric_reader,
            extra: self.extra,
        })
        .map_err(|e| SetupError::Exporter {
            what: e.what,
            source: e.source,
        })?;
        let mut pipeline = pipeline;
        let recorder = pipeline.recorder.take();
        let pipeline = Arc::new(pipeline);
        if !cfg.quiet {
            let signals: Vec<&str> = [
                (pipeline.tracer_provider.is_some(), "spans"),
                (pipeline.meter_provider.is_some(), "metrics"),
                (pipeline.logger_provider.is_some(), "logs"),
            ]
            .iter()
            .filter_map(|(on, s)| on.then_some(*s))
            .collect();
            crate::diag::warn(format_args!(
                "run {run_id}, rank {} of {}: {} to {} (span groups: {}; NEMO_LENS_QUIET=1 hides this line)",
                self.rank,
                self.world_size,
                signals.join(", "),
                pipeline.destination,
                groups.names().join(", "),
            ));
            #[cfg(feature = "tracing")]
            let routes = crate::bridge::known_routes();
            #[cfg(not(feature = "tracing"))]
            let routes = Vec::new();
            if let Some(w) = super::off_groups::warning(&cfg.span_groups, &groups, &routes) {
                crate::diag::warn(format_args!("{w}"));
            }
        }

        // install: from here on nothing fails
        if let Some(previous) = take_over(generation) {
            signal::clear_live(previous);
            teardown_globals(false);
        }
        crate::sdk::fork::set_armed(true);
        if let Some(tp) = &pipeline.tracer_provider {
            span::set_tracer_provider(tp);
            if let Some((rec, sink, interval)) = recorder {
                crate::engine::recorder::install(rec, sink, interval);
            }
            open::set_tracking(true);
        }
        if let Some(mp) = &pipeline.meter_provider {
            // metric attributes are redacted where they are recorded (the
            // SDK's aggregated data cannot be edited before export)
            opentelemetry::global::set_meter_provider(RedactingMeterProvider::new(
                mp.clone(),
                redactor.clone(),
            ));
        }
        if let (true, Some(meter)) = (cfg.gpu_metrics, pipeline.meter()) {
            #[cfg(feature = "gpu")]
            crate::sdk::gpu::register_gpu_metrics(&meter);
            #[cfg(not(feature = "gpu"))]
            let _ = meter;
        }
        set_enabled_span_groups(&groups);
        if cfg.flush_on_signal {
            let weak = Arc::downgrade(&pipeline);
            signal::set_live(
                generation,
                otel_env.signal_flush_timeout,
                self.world_size,
                Box::new(move |truncate, timeout| match weak.upgrade() {
                    Some(p) => {
                        if truncate {
                            open::truncate_all(signal::SIGNAL_REASON);
                        }
                        p.flush(timeout)
                    }
                    None => Default::default(),
                }),
            );
        }
        Ok(TelemetryHandle::exporting(pipeline, generation, run_id))
    }
}
