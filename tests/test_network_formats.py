"""The parsers of iperf3, ping and sockperf output (ccbench.formats), on output the real tools wrote
here (tests/data/network/: iperf3 3.12 between two emulated hosts, ping on loopback, sockperf 3.7
ping-pong) and on small logs written from the tools' documented formats."""

import json
from pathlib import Path

import pytest

from ccbench.basics.errors import CCBenchError
from ccbench.formats import FormatError, iperf3, ping, sockperf

DATA = Path(__file__).parent / "data" / "network"


def _text(name: str) -> str:
    return (DATA / name).read_text()


def _by_metric(measurements):
    found = {}
    for m in measurements:
        found.setdefault(m.metric, []).append(m)
    return found


def test_tcp_client_log_gives_every_interval_of_every_stream_and_the_sum_as_the_result():
    (test,) = iperf3.parse_text(_text("iperf3-tcp-client.txt"))
    assert (test.role, test.protocol, test.streams, test.reverse) == ("client", "tcp", 2, False)
    found = _by_metric(iperf3.measurements(test))
    intervals = found["sender_interval_throughput"]
    assert len(intervals) == 8  # 4 intervals x 2 streams; the SUM interval lines are not streams
    assert {m.metadata["stream"] for m in intervals} == {"5", "7"}
    first = intervals[0]
    assert (first.value, first.metadata["interval_start_s"], first.metadata["interval_end_s"]) == (120.0, 0.0, 0.5)
    assert first.metadata["retransmits"] == 0 and first.metadata["cwnd_bytes"] == 105 * 1024
    assert [m.value for m in found["throughput"]] == [191.0]  # the receiver's SUM line
    assert found["throughput"][0].metadata["side"] == "receiver"
    assert [m.value for m in found["sender_throughput"]] == [200.0]
    assert [m.value for m in found["retransmits"]] == [0.0]
    assert first.case == {"protocol": "tcp", "streams": 2} and first.better == "higher"


def test_tcp_server_log_is_the_receiving_side():
    (test,) = iperf3.parse_text(_text("iperf3-tcp-server.txt"))
    assert test.role == "server"
    found = _by_metric(iperf3.measurements(test))
    assert len(found["interval_throughput"]) == 10  # 5 intervals (the last a 10 ms rest) x 2 streams
    assert found["interval_throughput"][-1].metadata["interval_end_s"] == 2.01
    assert [m.value for m in found["throughput"]] == [191.0]
    assert "sender_throughput" not in found


def test_udp_client_log_derives_the_datagram_size_and_reads_receive_rate_loss_and_jitter():
    (test,) = iperf3.parse_text(_text("iperf3-udp-client.txt"))
    assert test.protocol == "udp" and test.datagram_size == 1460
    low, high = test.datagram_size_bounds
    assert low <= 1460 <= high and high - low < 5
    found = _by_metric(iperf3.measurements(test))
    assert found["throughput"][0].value == 99.8 and found["throughput"][0].case["datagram_size"] == 1460
    assert found["throughput"][0].metadata["datagram_size_derived"] is True
    assert found["loss"][0].value == 0.0 and found["jitter"][0].value == 0.017
    assert found["sender_throughput"][0].value == 100.0
    assert {m.metadata["datagrams"] for m in found["sender_interval_throughput"]} == {2137, 2141, 2140}


def test_udp_server_log_intervals_carry_loss_and_jitter():
    (test,) = iperf3.parse_text(_text("iperf3-udp-server.txt"))
    found = _by_metric(iperf3.measurements(test))
    intervals = found["interval_throughput"]
    assert len(intervals) == 10
    assert intervals[0].metadata["jitter_ms"] == 0.006 and intervals[0].metadata["lost"] == 0
    assert found["throughput"][0].value == 99.8 and test.datagram_size == 1460


def test_reverse_mode_is_read_from_the_client_and_inferred_on_the_server():
    (client,) = iperf3.parse_text(_text("iperf3-udp-reverse-client.txt"))
    (server,) = iperf3.parse_text(_text("iperf3-udp-reverse-server.txt"))
    assert client.reverse and server.reverse
    assert client.case() == server.case() == {"protocol": "udp", "streams": 1, "datagram_size": 1460, "reverse": True}
    assert {m.metric for m in iperf3.measurements(client)} >= {"interval_throughput", "throughput", "loss"}
    assert "throughput" not in {m.metric for m in iperf3.measurements(server)}  # the sender knows no receive rate


def test_a_log_with_several_tests_and_loss_written_from_the_documented_format():
    """A server that served two UDP tests, the second losing datagrams (iperf3's documented line
    shapes; 1024-byte datagrams: not one of the preferred sizes' neighbours)."""
    log = """-----------------------------------------------------------
Server listening on 5201 (test #1)
-----------------------------------------------------------
Accepted connection from 10.0.0.2, port 40000
[  5] local 10.0.0.1 port 5201 connected to 10.0.0.2 port 41000
[ ID] Interval           Transfer     Bitrate         Jitter    Lost/Total Datagrams
[  5]   0.00-1.00   sec  1.00 MBytes  8.39 Mbits/sec  0.010 ms  0/1024 (0%)
- - - - - - - - - - - - - - - - - - - - - - - - -
[ ID] Interval           Transfer     Bitrate         Jitter    Lost/Total Datagrams
[  5]   0.00-1.00   sec  1.00 MBytes  8.39 Mbits/sec  0.010 ms  0/1024 (0%)  receiver
-----------------------------------------------------------
Server listening on 5201 (test #2)
-----------------------------------------------------------
Accepted connection from 10.0.0.2, port 40002
[  5] local 10.0.0.1 port 5201 connected to 10.0.0.2 port 41002
[ ID] Interval           Transfer     Bitrate         Jitter    Lost/Total Datagrams
[  5]   0.00-1.00   sec   768 KBytes  6.29 Mbits/sec  0.020 ms  256/1024 (25%)
- - - - - - - - - - - - - - - - - - - - - - - - -
[ ID] Interval           Transfer     Bitrate         Jitter    Lost/Total Datagrams
[  5]   0.00-1.00   sec   768 KBytes  6.29 Mbits/sec  0.020 ms  256/1024 (25%)  receiver
"""
    first, second = iperf3.parse_text(log)
    assert first.datagram_size == second.datagram_size == 1024
    found = _by_metric(iperf3.measurements(second))
    assert found["loss"][0].value == 25.0 and found["throughput"][0].value == 6.29
    assert found["interval_throughput"][0].metadata["lost"] == 256


def test_json_documents_give_the_same_samples_with_the_named_datagram_size():
    document = json.loads(_text("iperf3-udp-client.json"))
    (test,) = iperf3.parse_json(document)
    assert test.datagram_size == 1460 and test.datagram_size_bounds is None
    found = _by_metric(iperf3.measurements(test))
    assert len(found["sender_interval_throughput"]) == 8
    assert found["throughput"][0].value == pytest.approx(99.838, abs=1e-3)
    assert "datagram_size_derived" not in found["throughput"][0].metadata
    assert test.facts["version"] == "iperf 3.12" and test.facts["target_bitrate"] == 50000000
    (tcp,) = iperf3.parse_json(json.loads(_text("iperf3-tcp-client.json")))
    tcp_found = _by_metric(iperf3.measurements(tcp))
    assert tcp_found["throughput"][0].value == pytest.approx(191.466, abs=1e-3)
    assert tcp_found["sender_interval_throughput"][0].metadata["cwnd_bytes"] == 150592


def test_a_servers_json_leaves_out_the_sum_it_does_not_know():
    (server,) = iperf3.parse_json(json.loads(_text("iperf3-udp-server.json")))
    metrics = {m.metric for m in iperf3.measurements(server)}
    assert "throughput" in metrics and "sender_throughput" not in metrics


def test_json_with_the_servers_output_gives_both_sides():
    client = json.loads(_text("iperf3-udp-client.json"))
    client["server_output_json"] = json.loads(_text("iperf3-udp-server.json"))
    tests = iperf3.parse_json(client)
    assert [t.role for t in tests] == ["client", "server"]
    assert {m.metric for m in iperf3.measurements(tests[1]) if "interval" in m.metric} == {"interval_throughput"}


@pytest.mark.parametrize(
    "parse, text",
    [
        (iperf3.parse_text, "iperf3: error - unable to connect to server: Connection refused\n"),
        (lambda t: iperf3.parse_json(json.loads(t)), '{"start": {}, "intervals": [], "end": {}, "error": "boom"}'),
        (lambda t: iperf3.parse_json(json.loads(t)), '{"error": "unable to connect to server"}'),
        (ping.parse, "ping: unknown host nowhere\n"),
        (sockperf.parse, "sockperf: ERROR: connect failed\n"),
    ],
)
def test_output_without_a_measurement_is_a_one_line_format_error(parse, text):
    try:
        result = parse(text)
    except FormatError as exc:
        assert isinstance(exc, CCBenchError) and "\n" not in str(exc)
    else:
        # iperf3's JSON with an error but an (empty) interval list parses to no samples at all
        assert not [m for test in result for m in iperf3.measurements(test)]


def test_ping_each_reply_is_a_sample_and_the_statistics_give_the_loss():
    run = ping.parse(_text("ping-loopback.txt"))
    found = _by_metric(ping.measurements(run))
    assert [m.value for m in found["rtt"]] == [0.148, 0.042, 0.040, 0.042, 0.042]
    assert [m.metadata["icmp_seq"] for m in found["rtt"]] == [1, 2, 3, 4, 5]
    assert found["loss"][0].value == 0.0 and found["loss"][0].metadata["sent"] == 5
    assert found["rtt"][0].case == {"protocol": "icmp", "payload_size": 56}


def test_ping_variants_written_from_their_documented_formats():
    iputils = """PING 10.0.0.1 (10.0.0.1) 56(84) bytes of data.
[1700000000.000100] 64 bytes from 10.0.0.1: icmp_seq=1 ttl=64 time=0.250 ms
[1700000001.000100] 64 bytes from 10.0.0.1: icmp_seq=1 ttl=64 time=0.300 ms (DUP!)
[1700000002.000100] 64 bytes from 10.0.0.1: icmp_seq=3 ttl=64 time=1.50 ms

--- 10.0.0.1 ping statistics ---
3 packets transmitted, 2 received, +1 duplicates, 33.3333% packet loss, time 2003ms
"""
    run = ping.parse(iputils)
    assert [r.rtt_ms for r in run.replies] == [0.25, 1.5] and run.duplicates == 1
    assert run.replies[0].timestamp == 1700000000.0001 and run.loss_percent == pytest.approx(33.3333)
    windows = """Pinging example.org [93.184.216.34] with 32 bytes of data:
Reply from 93.184.216.34: bytes=32 time=12ms TTL=56
Reply from 93.184.216.34: bytes=32 time<1ms TTL=56

Ping statistics for 93.184.216.34:
    Packets: Sent = 2, Received = 2, Lost = 0 (0% loss),
"""
    run = ping.parse(windows)
    assert [r.rtt_ms for r in run.replies] == [12.0, 1.0] and run.replies[1].below
    assert run.payload_size == 32 and run.loss_percent == 0.0
    assert ping.measurements(run)[1].metadata["upper_bound"] is True


def test_sockperf_ping_pong_summary():
    result = sockperf.parse(_text("sockperf-udp-client.txt"))
    found = {m.metric: m for m in sockperf.measurements(result, case={"protocol": "udp"})}
    assert found["latency_avg"].value == 11.813 and found["latency_p50"].value == 9.494
    assert found["latency_p99"].value == 26.188 and found["latency_p999"].value == 47.435
    assert found["latency_max"].value == 3933.203 and found["latency_min"].value == 9.038
    assert found["latency_p50"].metadata["half_round_trip"] is True
    assert found["latency_p50"].metadata["observations"] == 23186
    assert found["latency_p50"].unit == "us" and found["latency_p50"].case == {"protocol": "udp"}


def test_older_and_bidirectional_logs_written_from_the_documented_formats():
    """iperf3 3.1's UDP client summary (one line, the receiver's report, no sender/receiver word, then
    'Sent N datagrams') and 3.7+'s --bidir tags ([  5][TX-C], [  7][RX-C]) as streams of their own."""
    old = """Connecting to host 10.0.0.1, port 5201
[  4] local 10.0.0.2 port 50000 connected to 10.0.0.1 port 5201
[ ID] Interval           Transfer     Bandwidth       Total Datagrams
[  4]   0.00-1.00   sec   128 KBytes  1.05 Mbits/sec  128
- - - - - - - - - - - - - - - - - - - - - - - - -
[ ID] Interval           Transfer     Bandwidth       Jitter    Lost/Total Datagrams
[  4]   0.00-1.00   sec   127 KBytes  1.04 Mbits/sec  0.050 ms  1/128 (0.78%)
[  4] Sent 128 datagrams
"""
    (test,) = iperf3.parse_text(old)
    found = _by_metric(iperf3.measurements(test))
    assert found["throughput"][0].value == 1.04 and found["loss"][0].value == 0.78
    assert test.datagram_size == 1024 and len(found["sender_interval_throughput"]) == 1
    bidir = """Connecting to host 10.0.0.1, port 5201
[  5] local 10.0.0.2 port 50002 connected to 10.0.0.1 port 5201
[  7] local 10.0.0.2 port 50004 connected to 10.0.0.1 port 5201
[ ID][Role] Interval           Transfer     Bitrate         Retr  Cwnd
[  5][TX-C]   0.00-1.00   sec   112 MBytes   940 Mbits/sec    3    300 KBytes
[  7][RX-C]   0.00-1.00   sec   110 MBytes   923 Mbits/sec
- - - - - - - - - - - - - - - - - - - - - - - - -
[ ID][Role] Interval           Transfer     Bitrate         Retr
[  5][TX-C]   0.00-1.00   sec   112 MBytes   940 Mbits/sec    3             sender
[  5][TX-C]   0.00-1.00   sec   111 MBytes   931 Mbits/sec                  receiver
[  7][RX-C]   0.00-1.00   sec   110 MBytes   923 Mbits/sec    0             sender
[  7][RX-C]   0.00-1.00   sec   110 MBytes   922 Mbits/sec                  receiver
"""
    (test,) = iperf3.parse_text(bidir)
    sides = {(m.metric, m.metadata["stream"]) for m in iperf3.measurements(test) if "interval" in m.metric}
    assert sides == {("sender_interval_throughput", "5[TX-C]"), ("interval_throughput", "7[RX-C]")}
    assert test.streams == 2 and test.result("receiver") is None  # two directions: no one sum to call the result
