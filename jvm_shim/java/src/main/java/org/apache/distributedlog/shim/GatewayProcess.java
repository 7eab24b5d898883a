package org.apache.distributedlog.shim;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.distributedlog.exceptions.DLInterruptedException;
import org.apache.distributedlog.exceptions.ServiceUnavailableException;

/**
 * A gateway process started by this JVM: {@code <python> -m jvm_shim --uri URI --port 0 --parent-watch} with a
 * random py4j auth token in {@code DLOG_GATEWAY_TOKEN}. The interpreter is {@code $DLOG_PYTHON}, else
 * {@code $PYSPARK_PYTHON}, else {@code python3}. The process announces its port on its first stdout line,
 * {@code GATEWAY port=<port> token=env}. Its other output (stderr, and stdout after that line) is copied to this
 * JVM's stderr (prefixed {@code [dlog-gateway] }, unless {@code DLOG_GATEWAY_QUIET=1}) and its tail kept for error
 * messages. Its stdin stays open: with {@code --parent-watch} the gateway exits when this JVM dies, even by
 * SIGKILL.
 */
final class GatewayProcess {

    private static final Pattern ANNOUNCE = Pattern.compile("^GATEWAY port=(\\d+)(?: token=(\\S+))?\\s*$");
    private static final int TAIL_CHARS = 8192;

    private final Process process;
    private final List<String> command;
    private final String token;
    private final StringBuilder tail = new StringBuilder();
    private final CompletableFuture<Integer> port = new CompletableFuture<>();
    private final Thread shutdownHook;

    private GatewayProcess(Process process, List<String> command, String token) {
        this.process = process;
        this.command = command;
        this.token = token;
        this.shutdownHook = new Thread(this::reap, "dlog-gateway-reaper");
    }

    /** The interpreter: {@code $DLOG_PYTHON}, else {@code $PYSPARK_PYTHON}, else {@code python3}. */
    static String defaultPython() {
        for (String var : new String[] {"DLOG_PYTHON", "PYSPARK_PYTHON"}) {
            String v = System.getenv(var);
            if (v != null && !v.trim().isEmpty()) {
                return v.trim();
            }
        }
        return "python3";
    }

    static String newToken() {
        byte[] b = new byte[24];
        new SecureRandom().nextBytes(b);
        StringBuilder sb = new StringBuilder();
        for (byte x : b) {
            sb.append(String.format("%02x", x & 0xFF));
        }
        return sb.toString();
    }

    /**
     * Start the gateway and wait for its port.
     *
     * @throws ServiceUnavailableException if the interpreter cannot be run, or the process exits or does not
     *         announce its port within {@code timeoutMs} (the message names the command and quotes its stderr)
     */
    static GatewayProcess start(String python, String uri, long timeoutMs) throws IOException {
        List<String> cmd = new ArrayList<>(List.of(python, "-m", "jvm_shim", "--uri", uri, "--port", "0",
                                                   "--parent-watch"));
        String token = newToken();
        ProcessBuilder pb = new ProcessBuilder(cmd);
        Map<String, String> env = pb.environment();
        env.put("DLOG_GATEWAY_TOKEN", token);
        env.remove("DLOG_GATEWAY");
        env.putIfAbsent("PYTHONUNBUFFERED", "1");
        pb.redirectInput(ProcessBuilder.Redirect.PIPE);
        Process p;
        try {
            p = pb.start();
        } catch (IOException e) {
            ServiceUnavailableException se = new ServiceUnavailableException(
                "cannot start the DistributedLog gateway with '" + String.join(" ", cmd) + "': " + e.getMessage()
                    + " (set DLOG_PYTHON, or PYSPARK_PYTHON, to a Python that has this project installed)");
            se.initCause(e);
            throw se;
        }
        GatewayProcess gp = new GatewayProcess(p, cmd, token);
        gp.pump(p.getInputStream(), true);
        gp.pump(p.getErrorStream(), false);
        try {
            Runtime.getRuntime().addShutdownHook(gp.shutdownHook);
        } catch (IllegalStateException e) {
            // the JVM is already shutting down
        }
        try {
            gp.port.get(timeoutMs, TimeUnit.MILLISECONDS);
        } catch (TimeoutException e) {
            gp.abandon();
            throw gp.failure("did not announce its port within " + timeoutMs + " ms");
        } catch (ExecutionException e) {
            gp.waitQuietly(2000);
            gp.abandon();
            throw gp.failure(e.getCause().getMessage());
        } catch (InterruptedException e) {
            gp.abandon();
            Thread.currentThread().interrupt();
            throw new DLInterruptedException("interrupted while starting the DistributedLog gateway");
        }
        return gp;
    }

    private ServiceUnavailableException failure(String what) {
        String status = process.isAlive() ? "" : " (exit code " + process.exitValue() + ")";
        return new ServiceUnavailableException("the DistributedLog gateway '" + String.join(" ", command) + "' "
            + what + status + "; interpreter: " + command.get(0) + "; its stderr: " + stderrTail());
    }

    private void pump(InputStream in, boolean stdout) {
        boolean quiet = "1".equals(System.getenv("DLOG_GATEWAY_QUIET"));
        PrintStream err = System.err;
        Thread t = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8))) {
                String line;
                while ((line = r.readLine()) != null) {
                    if (stdout && !port.isDone()) {
                        Matcher m = ANNOUNCE.matcher(line.trim());
                        if (m.matches()) {
                            port.complete(Integer.parseInt(m.group(1)));
                            continue;
                        }
                    }
                    synchronized (tail) {
                        tail.append(line).append('\n');
                        if (tail.length() > TAIL_CHARS) {
                            tail.delete(0, tail.length() - TAIL_CHARS);
                        }
                    }
                    if (!quiet) {
                        err.println("[dlog-gateway] " + line);
                    }
                }
            } catch (IOException e) {
                // the process is gone
            }
            if (stdout) {
                port.completeExceptionally(new IOException("exited before announcing its port"));
            }
        }, stdout ? "dlog-gateway-stdout" : "dlog-gateway-stderr");
        t.setDaemon(true);
        t.start();
    }

    int port() {
        return port.join();
    }

    String token() {
        return token;
    }

    long pid() {
        return process.pid();
    }

    String stderrTail() {
        synchronized (tail) {
            String s = tail.toString().trim();
            return s.isEmpty() ? "(empty)" : s;
        }
    }

    /** For error messages of a broken connection. */
    String describe() {
        if (process.isAlive()) {
            return "gateway process " + process.pid() + " is running";
        }
        return "gateway process " + process.pid() + " exited with code " + process.exitValue() + "; its stderr: "
            + stderrTail();
    }

    private void waitQuietly(long ms) {
        try {
            process.waitFor(ms, TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /**
     * Wait up to {@code graceMs} for the process to exit (after {@code gateway.shutdown}), then terminate it (and
     * kill it 5 s later if needed).
     */
    void stop(long graceMs) {
        waitQuietly(graceMs);
        if (process.isAlive()) {
            process.destroy();
            waitQuietly(5000);
        }
        abandon();
    }

    /** Kill the process (if still alive) and drop the shutdown hook: nothing is left to reap at JVM exit. */
    private void abandon() {
        destroyNow();
        try {
            Runtime.getRuntime().removeShutdownHook(shutdownHook);
        } catch (IllegalStateException e) {
            // the JVM is shutting down (the hook runs, or is running this)
        }
    }

    /** At JVM exit without {@code Namespace.close()}: close its stdin (the parent watch stops it), then terminate. */
    private void reap() {
        try {
            process.getOutputStream().close();
        } catch (IOException e) {
            // gone
        }
        waitQuietly(3000);
        if (process.isAlive()) {
            process.destroy();
            waitQuietly(2000);
        }
        destroyNow();
    }

    private void destroyNow() {
        if (process.isAlive()) {
            process.destroyForcibly();
        }
        try {
            process.getOutputStream().close();
        } catch (IOException e) {
            // gone
        }
    }
}
