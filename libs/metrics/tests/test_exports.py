"""Exports parse back with AIPerf 0.13's exact keys and layout."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
from collections.abc import Callable
from pathlib import Path

from rich.console import Console

from aiperf.endpoints import EndpointType, parse_response
from aiperf.messages import ErrorDetails, MetricRecord, Phase, RequestRecord
from aiperf.metrics import (
    STAT_KEYS,
    Aggregator,
    JsonlRecordWriter,
    Summary,
    compute_metrics,
    render_console_table,
    write_summary_csv,
    write_summary_json,
)

MS = 1_000_000
RECORD_KEYS = ["unit", "avg", "p1", "p5", "p10", "p25", "p50", "p75", "p90", "p95", "p99", "min", "max",
               "std", "count", "sum"]


def _words(text: str) -> int:
    return len(text.split())


def _metric_records(make_record: Callable[..., RequestRecord]) -> list[MetricRecord]:
    out = []
    for i in range(10):
        rec = make_record(4 + i % 3, first_ms=30 + i, credit_num=i, credit_issued_ns=999 * MS)
        out.append(compute_metrics(rec, parse_response(EndpointType.CHAT, True, rec), count_tokens=_words,
                                   processor_id="rp"))
    bad = make_record(1, status=500, chunks=[b"boom"], credit_num=10)
    out.append(compute_metrics(bad, parse_response(EndpointType.CHAT, True, bad), count_tokens=_words))
    warm = make_record(2, phase=Phase.WARMUP)
    out.append(compute_metrics(warm, parse_response(EndpointType.CHAT, True, warm), count_tokens=_words))
    return out


def _summary(records: list[MetricRecord]) -> Summary:
    agg = Aggregator()
    for r in records:
        agg.add(r)
    return agg.summary(benchmark_duration_s=2.0, goodput={"time_to_first_token": 35})


def test_summary_json_shape(tmp_path: Path, make_record: Callable[..., RequestRecord]) -> None:
    summary = _summary(_metric_records(make_record))
    path = tmp_path / "profile_export_aiperf.json"
    write_summary_json(path, summary, {"endpoint": {"model_names": ["m"]}}, None,
                       dt.datetime(2026, 1, 1, tzinfo=dt.UTC), "2026-01-01T00:00:02+00:00", False,
                       {"credits": {"issued": 11, "succeeded": 10, "failed": 1, "cancelled": 0}})
    doc = json.loads(path.read_text())
    keys = list(doc)
    assert keys[:3] == ["schema_version", "aiperf_version", "benchmark_id"] and doc["schema_version"] == "1.4"
    assert keys[3:9] == ["request_throughput", "request_latency", "request_count", "time_to_first_token",
                         "time_to_second_token", "inter_token_latency"]
    assert list(doc["time_to_first_token"]) == RECORD_KEYS
    assert doc["time_to_first_token"]["unit"] == "ms" and doc["time_to_first_token"]["count"] == 10
    assert doc["time_to_first_token"]["min"] == 30.0 and doc["time_to_first_token"]["max"] == 39.0
    assert doc["request_throughput"] == {"unit": "requests/sec", "avg": 5.0}
    assert doc["request_count"] == {"unit": "requests", "avg": 10}
    assert doc["error_request_count"] == {"unit": "requests", "avg": 1}
    assert doc["good_request_count"] == {"unit": "requests", "avg": 6}
    assert doc["goodput"] == {"unit": "requests/sec", "avg": 3.0}
    assert doc["benchmark_duration"] == {"unit": "sec", "avg": 2.0}
    assert doc["output_token_throughput_per_user"]["unit"] == "tokens/sec/user"
    assert doc["input_sequence_length"]["unit"] == "tokens"
    for key in ("input_config", "was_cancelled", "error_summary", "start_time", "end_time"):
        assert key in doc
    assert doc["error_summary"] == [{"error_details": {"code": 500, "type": "Internal Server Error",
                                                       "message": "boom"}, "count": 1}]
    assert doc["start_time"] == "2026-01-01T00:00:00+00:00"
    ext = doc["aiperf_extensions"]
    assert ext["credits"]["issued"] == 11
    assert "co_aware_request_latency" in ext["metrics"] and "co_aware_request_latency" not in doc


def test_summary_csv_layout(tmp_path: Path, make_record: Callable[..., RequestRecord]) -> None:
    summary = _summary(_metric_records(make_record))
    path = tmp_path / "profile_export_aiperf.csv"
    write_summary_csv(path, summary)
    text = path.read_text()
    first, second = text.split("\n\n") if "\r" not in text else text.split("\r\n\r\n")
    rows1 = list(csv.reader(io.StringIO(first)))
    rows2 = list(csv.reader(io.StringIO(second)))
    assert rows1[0] == ["Metric", "avg", "min", "max", "sum", "p1", "p5", "p10", "p25", "p50", "p75", "p90",
                        "p95", "p99", "std"] == ["Metric", *STAT_KEYS]
    names = [r[0] for r in rows1[1:]]
    assert "Time to First Token (ms)" in names and "Output Sequence Length (tokens)" in names
    ttft = next(r for r in rows1 if r[0] == "Time to First Token (ms)")
    assert ttft[2] == "30.00" and ttft[3] == "39.00"
    assert rows2[0] == ["Metric", "Value"]
    values = {r[0]: r[1] for r in rows2[1:]}
    assert values["Request Throughput (requests/sec)"] == "5.00"
    assert values["Request Count"] == "10" and values["Error Request Count"] == "1"


def test_jsonl_streams_aiperf_record_shape(tmp_path: Path, make_record: Callable[..., RequestRecord]) -> None:
    records = _metric_records(make_record)
    path = tmp_path / "profile_export.jsonl"
    with JsonlRecordWriter(path) as writer:
        writer.write(records[0])
        writer.flush()
        assert len(path.read_text().splitlines()) == 1  # visible before close
        for r in records[1:]:
            writer.write(r)
        assert writer.count == len(records)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(lines) == len(records)
    ok = lines[0]
    assert set(ok) == {"metadata", "metrics"}
    for key in ("session_num", "x_request_id", "conversation_id", "turn_index", "credit_issued_ns",
                "request_start_ns", "request_end_ns", "worker_id", "record_processor_id", "benchmark_phase",
                "was_cancelled"):
        assert key in ok["metadata"], key
    assert ok["metrics"]["time_to_first_token"] == {"value": 30.0, "unit": "ms"}
    assert ok["metrics"]["input_sequence_length"] == {"value": 100, "unit": "tokens"}
    assert ok["metrics"]["inter_chunk_latency"] == {"value": [8.0, 8.0, 8.0], "unit": "ms"}
    assert ok["metrics"]["output_token_throughput_per_user"]["unit"] == "tokens/sec/user"
    err = lines[10]
    assert err["metrics"] == {"error_isl": {"value": 100, "unit": "tokens"}}
    assert err["error"] == {"code": 500, "type": "Internal Server Error", "message": "boom"}
    assert lines[11]["metadata"]["benchmark_phase"] == "warmup"


def test_console_table() -> None:
    agg = Aggregator()
    agg.add(MetricRecord(phase=Phase.PROFILING, credit_num=0, worker_id="w", conversation_id="c",
                         metrics={"time_to_first_token": 40 * MS, "inter_chunk_latency": [1.0]}))
    agg.add(MetricRecord(phase=Phase.PROFILING, credit_num=1, worker_id="w", conversation_id="c",
                         error=ErrorDetails(type="t", message="m")))
    table = render_console_table(agg.summary(benchmark_duration_s=1.0))
    assert table.title == "aiperf | LLM Metrics"
    assert [c.header for c in table.columns] == ["Metric", "avg", "min", "max", "p99", "p90", "p50", "std"]
    console = Console(record=True, width=200, file=io.StringIO())
    console.print(table)
    text = console.export_text()
    assert "Time to First Token (ms)" in text and "40.00" in text
    assert "Request Throughput (requests/sec)" in text and "N/A" in text
    assert "Inter Chunk Latency" not in text


SWEEP_KEYS = ["unit", "avg", "p50", "p90", "p95", "p99", "min", "max", "std"]


def _timed_records(make_record: Callable[..., RequestRecord],
                   sse_chat: Callable[..., list[bytes]]) -> list[MetricRecord]:
    from aiperf.messages import HttpTrace

    out = []
    for i in range(6):
        t0 = 1_000 * MS
        trace = HttpTrace(reused=i > 0, send_start_ns=t0, send_end_ns=t0 + MS, recv_first_ns=t0 + 30 * MS,
                          recv_last_ns=t0 + 60 * MS, sent_bytes=400, recv_bytes=4000, writes=1, reads=8,
                          connect_start_ns=t0 - 2 * MS, connected_ns=t0 - MS)
        rec = make_record(4, credit_num=i, start_wall_ns=1_700_000_000_000_000_000 + i * 10 * MS,
                          requested_output_tokens=4, http=trace,
                          chunks=sse_chat([f"w{k} " for k in range(4)], {"prompt_tokens": 9, "completion_tokens": 4,
                                                                         "total_tokens": 13}))
        out.append(compute_metrics(rec, parse_response(EndpointType.CHAT, True, rec), count_tokens=_words))
    return out


def test_new_metrics_in_every_export(tmp_path: Path, make_record: Callable[..., RequestRecord],
                                    chat_chunks: Callable[..., list[bytes]]) -> None:
    from aiperf.metrics import SWEEP_METRICS, render_console_tables, summary_csv

    records = _timed_records(make_record, chat_chunks)
    summary = _summary(records)
    path = tmp_path / "profile_export_aiperf.json"
    write_summary_json(path, summary, {}, None, "a", "b", False)
    doc = json.loads(path.read_text())
    for spec in SWEEP_METRICS:
        assert list(doc[spec.tag]) == SWEEP_KEYS, spec.tag
        assert doc[spec.tag]["unit"] == spec.unit
    assert doc["effective_concurrency"]["unit"] == "requests"
    assert doc["http_req_waiting"]["unit"] == "ms" and doc["http_req_waiting"]["avg"] == 29.0
    assert list(doc["http_req_waiting"]) == RECORD_KEYS
    assert doc["http_req_data_sent"]["unit"] == "KB" and doc["http_req_data_sent"]["avg"] == 400 / 1024
    assert doc["http_req_connection_reused"] == {**doc["http_req_connection_reused"], "unit": "ratio",
                                                 "avg": 5 / 6, "count": 6}
    assert doc["http_req_connecting"]["max"] == 1.0 and doc["http_req_connecting"]["min"] == 0.0
    assert doc["request_error_rate"] == {"unit": "%", "avg": 0.0}
    assert doc["osl_mismatch_count"] == {"unit": "requests", "avg": 0}
    assert doc["osl_mismatch_diff_pct"]["unit"] == "%" and doc["osl_mismatch_diff_pct"]["avg"] == 0.0
    assert doc["total_usage_prompt_tokens"] == {"unit": "tokens", "avg": 54.0}
    assert "requested_osl" not in doc

    text = summary_csv(summary)
    first, second = text.split("\r\n\r\n")
    rows1 = {r[0]: r for r in csv.reader(io.StringIO(first))}
    values = {r[0]: r[1] for r in csv.reader(io.StringIO(second))}
    conc = rows1["Effective Concurrency"]
    assert conc[STAT_KEYS.index("sum") + 1] == "" and conc[STAT_KEYS.index("p50") + 1] != ""
    assert "HTTP Waiting (TTFB) (ms)" in rows1 and "HTTP Data Sent (KB)" in rows1
    assert values["Request Error Rate (%)"] == "0.00" and values["OSL Mismatch Count"] == "0"

    titles = [t.title for t in render_console_tables(summary)]
    assert titles == ["aiperf | LLM Metrics: Effective", "aiperf | LLM Metrics: Active",
                      "aiperf | LLM Metrics: Usage", "aiperf | LLM Metrics"]
    console = Console(record=True, width=200, file=io.StringIO())
    for table in render_console_tables(summary):
        console.print(table)
    shown = console.export_text()
    assert "Effective Concurrency" in shown and "Active Decode Throughput (tokens/sec)" in shown
    assert "Total Usage Prompt Tokens (tokens)" in shown and "Request Error Rate (%)" in shown
    assert "HTTP" not in shown and "OSL Mismatch" not in shown

    line = record_jsonl_line(records[0])
    assert line["metrics"]["http_req_waiting"] == {"value": 29.0, "unit": "ms"}
    assert line["metrics"]["osl_mismatch_diff_pct"] == {"value": 0.0, "unit": "%"}
    assert not any(t.startswith(("effective_", "active_", "total_usage")) for t in line["metrics"])


def record_jsonl_line(record: MetricRecord) -> dict:
    from aiperf.metrics import record_json

    return record_json(record)
