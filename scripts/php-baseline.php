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
// Closing at once, as the cookbooks did, delivers everything: the kernel sends what is
// queued before the FIN. No wait is needed against `salvo mock` or Apple's gateway: after
// the handshake neither sends anything but error responses (and a valid command-0
// notification gets none). A close with unread bytes in the receive buffer would
// reset the connection and lose the tail, as TLS 1.3 session tickets did (`salvo mock --tls 1.3`).
fclose($fp);
printf("php-baseline: %d notifications in %.6f s\n", $count, $seconds);
