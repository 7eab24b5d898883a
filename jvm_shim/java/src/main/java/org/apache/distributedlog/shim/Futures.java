package org.apache.distributedlog.shim;

import java.io.IOException;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executor;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.distributedlog.exceptions.DLInterruptedException;

/**
 * Helpers for futures and threads. Public for the Spark Real-Time Mode source
 * ({@code org.apache.distributedlog.spark.rt}), which waits for the Java API's futures with {@link #result} and
 * {@link #unwrap}.
 */
public final class Futures {

    private Futures() {
    }

    /**
     * Wait for {@code f} and return its value, throwing its failure as it is.
     *
     * @throws IOException the future's failure when it is one (a {@code DLException} of the gateway...), else
     *     wrapped in one; {@link DLInterruptedException} when the wait is interrupted or the future cancelled;
     *     the failure itself when it is unchecked
     */
    public static <T> T result(CompletableFuture<T> f) throws IOException {
        try {
            return f.get();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new DLInterruptedException("interrupted while waiting for the DistributedLog gateway");
        } catch (ExecutionException e) {
            throw Errors.rethrow(unwrap(e.getCause()));
        } catch (CancellationException e) {
            throw new DLInterruptedException("cancelled: " + e.getMessage());
        }
    }

    /** The cause inside {@link CompletionException}s and {@link ExecutionException}s around {@code t}. */
    public static Throwable unwrap(Throwable t) {
        while ((t instanceof CompletionException || t instanceof ExecutionException) && t.getCause() != null) {
            t = t.getCause();
        }
        return t;
    }

    static <T> CompletableFuture<T> failed(Throwable t) {
        CompletableFuture<T> f = new CompletableFuture<>();
        f.completeExceptionally(t);
        return f;
    }

    /** A function that may throw an {@link IOException}. */
    interface IOSupplier<T> {
        T get() throws IOException;
    }

    /** Run {@code body} on {@code executor}; its exception fails the future. */
    static <T> CompletableFuture<T> supply(Executor executor, IOSupplier<T> body) {
        CompletableFuture<T> f = new CompletableFuture<>();
        try {
            executor.execute(() -> {
                try {
                    f.complete(body.get());
                } catch (Throwable t) {
                    f.completeExceptionally(t);
                }
            });
        } catch (RuntimeException e) {
            f.completeExceptionally(e);
        }
        return f;
    }

    /** Daemon threads named {@code prefix-N}. */
    static ThreadFactory daemonThreads(String prefix) {
        AtomicInteger n = new AtomicInteger();
        return r -> {
            Thread t = new Thread(r, prefix + "-" + n.incrementAndGet());
            t.setDaemon(true);
            return t;
        };
    }
}
