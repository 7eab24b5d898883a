package org.apache.distributedlog.spark.rt;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import org.apache.spark.SparkEnv;
import org.apache.spark.storage.BlockManager;
import org.apache.spark.storage.BlockManagerId;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The executors a batch's tasks are pinned to, as Spark's Kafka source does: every executor but the driver, sorted
 * by host and id, each named as Spark's task locations name an executor ({@code executor_<host>_<id>}). The i-th log
 * (in name order) prefers the (i mod n)-th executor, so each log's task runs on the same executor batch after batch
 * while the executors stay, and the logs are spread over them. A log's writer in the real-time sink then stays open
 * in one executor instead of passing the log's lock from one executor to another at each batch.
 */
final class Executors {

    private Executors() {
    }

    /** The executors (not the driver), sorted; empty in local mode or when Spark's environment is not running. */
    static List<String> sorted() {
        List<String> out = new ArrayList<>();
        SparkEnv env = SparkEnv.get();
        if (env == null) {
            return out;
        }
        BlockManager bm = env.blockManager();
        List<BlockManagerId> peers = new ArrayList<>(
            CollectionConverters.asJava(bm.master().getPeers(bm.blockManagerId())));
        peers.removeIf(id -> id.isDriver());
        peers.sort(Comparator.comparing(BlockManagerId::host).thenComparing(BlockManagerId::executorId));
        for (BlockManagerId id : peers) {
            out.add("executor_" + id.host() + "_" + id.executorId());
        }
        return out;
    }

    /** The location of the {@code index}-th log of a batch, or null when there are no executors to prefer. */
    static String pick(List<String> executors, int index) {
        return executors.isEmpty() ? null : executors.get(Math.floorMod(index, executors.size()));
    }
}
