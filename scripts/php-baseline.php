<?php
// The classic way providers sent pushes over the APNs binary protocol, as the old iOS
// cookbooks taught: one TLS stream, one fwrite per simple-format (command 0) notification.
// The reference row of `salvo bench --php-baseline`.
//
//   php scripts/php-baseline.php HOST PORT CA CERT KEY COUNT [PAYLOAD_BYTES=100]
//
// Prints `php-baseline: COUNT notifications in SECONDS s` (the clock runs from the first
// fwrite to the last one returning; the TLS handshake is not counted).

if ($argc < 7) {
    fwrite(STDERR, "usage: php php-baseline.php HOST PORT CA CERT KEY COUNT [PAYLOAD_BYTES]\n");
    exit(2);
}
[$_, $host, $port, $ca, $cert, $key, $count] = $argv;
$count = (int)$count;
$payloadBytes = (int)($argv[7] ?? 100);

$context = stream_context_create(['ssl' => [
    'local_cert' => $cert,
    'local_pk' => $key,
    'cafile' => $ca,
    'verify_peer' => true,
    'peer_name' => 'localhost',
]]);
$fp = stream_socket_client("ssl://$host:$port", $errno, $errstr, 30,
                           STREAM_CLIENT_CONNECT, $context);
if (!$fp) {
    fwrite(STDERR, "Failed to connect: $errno $errstr\n");
    exit(1);
}

// {"aps":{"alert":"xxx…"}} of exactly $payloadBytes bytes, like the Salvo cells.
$payload = '{"aps":{"alert":"' . str_repeat('x', $payloadBytes - 21) . '"}}';
$started = hrtime(true);
for ($n = 1; $n <= $count; $n++) {
    $token = str_repeat('5a', 24) . sprintf('%016x', $n);
    $msg = chr(0) . pack('n', 32) . pack('H*', $token) . pack('n', strlen($payload)) . $payload;
    // The cookbooks wrote once and checked the result; a short write is finished here.
    $written = 0;
    while ($written < strlen($msg)) {
        $result = fwrite($fp, substr($msg, $written));
        if ($result === false || $result === 0) {
            fwrite(STDERR, "Message $n not delivered\n");
            exit(1);
        }
        $written += $result;
    }
}
$seconds = (hrtime(true) - $started) / 1e9;
// Not in the cookbooks, and not timed: closing at once loses the tail. The gateway's TLS 1.3
// session tickets sit unread in our receive buffer, so close() sends a TCP reset and the
// gateway's kernel drops what it has not read yet (160 of 100,000 on loopback).
usleep(300000);
fclose($fp);
printf("php-baseline: %d notifications in %.6f s\n", $count, $seconds);
