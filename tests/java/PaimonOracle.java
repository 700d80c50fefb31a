/*
 * Paimon's own Java implementation (the shaded Paimon 1.0 bundle of paimon-python-ali) as a test oracle.
 *
 * Test-only: the product never runs it. One JVM per test session reads requests as JSON lines on stdin
 * and answers each with one JSON line on stdout ({"ok": true, "result": ...} or {"ok": false, "error":
 * ...}); everything Paimon logs goes to stderr. tests/java/oracle.py starts it and documents the
 * requests. Values travel as typed JSON (see toJava / toJson): the bundle lacks netty, so no Arrow.
 */

import java.math.BigDecimal;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.LocalTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;

import org.apache.paimon.data.BinaryRow;
import org.apache.paimon.data.BinaryString;
import org.apache.paimon.data.Decimal;
import org.apache.paimon.data.GenericArray;
import org.apache.paimon.data.GenericMap;
import org.apache.paimon.data.GenericRow;
import org.apache.paimon.data.InternalArray;
import org.apache.paimon.data.InternalMap;
import org.apache.paimon.data.InternalRow;
import org.apache.paimon.data.Timestamp;
import org.apache.paimon.fs.Path;
import org.apache.paimon.fs.local.LocalFileIO;
import org.apache.paimon.index.HashBucketAssigner;
import org.apache.paimon.manifest.ManifestCommittable;
import org.apache.paimon.operation.FileStoreCommit;
import org.apache.paimon.operation.OrphanFilesClean;
import org.apache.paimon.options.ExpireConfig;
import org.apache.paimon.schema.Schema;
import org.apache.paimon.schema.SchemaChange;
import org.apache.paimon.schema.SchemaManager;
import org.apache.paimon.shade.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.paimon.shade.jackson2.com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.paimon.shade.jackson2.com.fasterxml.jackson.databind.node.ArrayNode;
import org.apache.paimon.shade.jackson2.com.fasterxml.jackson.databind.node.JsonNodeFactory;
import org.apache.paimon.shade.jackson2.com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.paimon.table.BucketMode;
import org.apache.paimon.table.FileStoreTable;
import org.apache.paimon.table.FileStoreTableFactory;
import org.apache.paimon.table.sink.BatchTableCommit;
import org.apache.paimon.table.sink.BatchWriteBuilder;
import org.apache.paimon.table.sink.CommitMessage;
import org.apache.paimon.table.sink.RowPartitionKeyExtractor;
import org.apache.paimon.table.sink.TableCommitImpl;
import org.apache.paimon.table.sink.TableWriteImpl;
import org.apache.paimon.table.source.DataSplit;
import org.apache.paimon.table.source.ReadBuilder;
import org.apache.paimon.table.source.Split;
import org.apache.paimon.types.ArrayType;
import org.apache.paimon.types.DataField;
import org.apache.paimon.types.DataType;
import org.apache.paimon.types.DataTypeJsonParser;
import org.apache.paimon.types.DecimalType;
import org.apache.paimon.types.MapType;
import org.apache.paimon.types.RowKind;
import org.apache.paimon.types.RowType;

public final class PaimonOracle {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final JsonNodeFactory NODES = JsonNodeFactory.instance;
    // Spill and lookup files (changelog-producer lookup, deletion vectors) go to the JVM's temp dir.
    private static final org.apache.paimon.disk.IOManager IO_MANAGER =
            org.apache.paimon.disk.IOManager.create(System.getProperty("java.io.tmpdir"));

    public static void main(String[] args) throws Exception {
        PrintStream answers = new PrintStream(System.out, true, "UTF-8");
        System.setOut(System.err); // anything Paimon prints must not corrupt the protocol
        BufferedReader requests =
                new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = requests.readLine()) != null) {
            if (line.isEmpty()) {
                continue;
            }
            ObjectNode answer = NODES.objectNode();
            try {
                JsonNode request = JSON.readTree(line);
                answer.put("ok", true);
                answer.set("result", handle(request));
            } catch (Throwable error) {
                error.printStackTrace(System.err);
                answer.put("ok", false);
                answer.put("error", error.getClass().getName() + ": " + error.getMessage());
            }
            answers.println(JSON.writeValueAsString(answer));
        }
    }

    private static JsonNode handle(JsonNode request) throws Exception {
        String op = request.get("op").asText();
        switch (op) {
            case "ping":
                return NODES.textNode("pong");
            case "create_table":
                return createTable(request);
            case "alter_table":
                return alterTable(request);
            case "write":
                return write(request);
            case "compact":
                return compact(request);
            case "compact_procedure":
                return compactProcedure(request);
            case "hilbert_index":
                return hilbertIndex(request);
            case "count_rows":
                return countRows(request);
            case "create_tag":
                table(request).createTag(request.get("name").asText(), request.get("snapshot_id").asLong());
                return NODES.nullNode();
            case "create_branch":
                if (request.hasNonNull("tag")) {
                    table(request).createBranch(request.get("name").asText(), request.get("tag").asText());
                } else {
                    table(request).createBranch(request.get("name").asText());
                }
                return NODES.nullNode();
            case "delete_branch":
                table(request).deleteBranch(request.get("name").asText());
                return NODES.nullNode();
            case "fast_forward":
                table(request).fastForward(request.get("name").asText());
                return NODES.nullNode();
            case "expire_snapshots":
                return NODES.numberNode(table(request).newExpireSnapshots().config(expireConfig(request)).expire());
            case "expire_changelog":
                return NODES.numberNode(table(request).newExpireChangelog().config(expireConfig(request)).expire());
            case "remove_orphan_files":
                return removeOrphanFiles(request);
            case "drop_partitions":
                return dropPartitions(request);
            case "compact_manifests":
                return compactManifests(request);
            case "race_write":
                return raceWrite(request);
            case "read":
                return read(request);
            case "read_system_table":
                return readSystemTable(request);
            case "read_changelog":
                return readChangelog(request);
            case "stream_consumer":
                return streamConsumer(request);
            case "reset_consumer":
                return resetConsumer(request);
            case "clear_consumers":
                return clearConsumers(request);
            case "snapshots_around":
                return snapshotsAround(request);
            case "mark_partition_done":
                return markPartitionDone(request);
            default:
                throw new IllegalArgumentException("unknown op " + op);
        }
    }

    // ----------------------------------------------------------------------------------------------
    // Tables
    // ----------------------------------------------------------------------------------------------

    private static FileStoreTable table(JsonNode request) {
        FileStoreTable table =
                FileStoreTableFactory.create(LocalFileIO.create(), new Path(request.get("path").asText()));
        Map<String, String> dynamic = new HashMap<>();
        if (request.hasNonNull("options")) {
            request.get("options").fields().forEachRemaining(e -> dynamic.put(e.getKey(), e.getValue().asText()));
        }
        if (request.hasNonNull("branch")) {
            table = table.switchToBranch(request.get("branch").asText());
        }
        return dynamic.isEmpty() ? table : table.copy(dynamic);
    }

    private static JsonNode createTable(JsonNode request) throws Exception {
        Schema.Builder schema = Schema.newBuilder();
        for (JsonNode field : request.get("fields")) {
            schema.column(field.get("name").asText(), DataTypeJsonParser.parseDataType(field.get("type")));
        }
        schema.partitionKeys(strings(request.get("partition_keys")));
        schema.primaryKey(strings(request.get("primary_keys")));
        Map<String, String> options = new LinkedHashMap<>();
        if (request.hasNonNull("table_options")) {
            request.get("table_options").fields()
                    .forEachRemaining(e -> options.put(e.getKey(), e.getValue().asText()));
        }
        schema.options(options);
        new SchemaManager(LocalFileIO.create(), new Path(request.get("path").asText())).createTable(schema.build());
        return NODES.nullNode();
    }

    private static JsonNode alterTable(JsonNode request) throws Exception {
        List<SchemaChange> changes = new ArrayList<>();
        for (JsonNode change : request.get("changes")) {
            String kind = change.get(0).asText();
            switch (kind) {
                case "add_column":
                    changes.add(SchemaChange.addColumn(
                            change.get(1).asText(), DataTypeJsonParser.parseDataType(change.get(2))));
                    break;
                case "rename_column":
                    changes.add(SchemaChange.renameColumn(change.get(1).asText(), change.get(2).asText()));
                    break;
                case "update_column_type":
                    changes.add(SchemaChange.updateColumnType(
                            change.get(1).asText(), DataTypeJsonParser.parseDataType(change.get(2))));
                    break;
                case "set_option":
                    changes.add(SchemaChange.setOption(change.get(1).asText(), change.get(2).asText()));
                    break;
                default:
                    throw new IllegalArgumentException("unknown schema change " + kind);
            }
        }
        SchemaManager manager = new SchemaManager(LocalFileIO.create(), new Path(request.get("path").asText()));
        if (request.hasNonNull("branch")) {
            manager = manager.copyWithBranch(request.get("branch").asText());
        }
        manager.commitChanges(changes);
        return NODES.nullNode();
    }

    private static List<String> strings(JsonNode array) {
        List<String> out = new ArrayList<>();
        if (array != null) {
            array.forEach(n -> out.add(n.asText()));
        }
        return out;
    }

    // ----------------------------------------------------------------------------------------------
    // Writing, compaction
    // ----------------------------------------------------------------------------------------------

    /** Commits the rows as one batch commit (an overwrite when "overwrite" is given); answers the new
     * latest snapshot id. Each row is an object by column name; "_kind" (+I, -U, +U, -D) sets its kind. */
    private static JsonNode write(JsonNode request) throws Exception {
        FileStoreTable table = table(request);
        RowType rowType = table.rowType();
        List<InternalRow> rows = new ArrayList<>();
        for (JsonNode row : request.get("rows")) {
            rows.add(toRow(row, rowType));
        }
        if (table.bucketMode() == BucketMode.HASH_DYNAMIC) {
            writeDynamicBucket(table, rows);
        } else {
            BatchWriteBuilder builder = table.newBatchWriteBuilder();
            if (request.hasNonNull("overwrite")) {
                Map<String, String> partition = new LinkedHashMap<>();
                request.get("overwrite").fields().forEachRemaining(e -> partition.put(e.getKey(), e.getValue().asText()));
                builder = builder.withOverwrite(partition);
            }
            try (org.apache.paimon.table.sink.BatchTableWrite write = builder.newWrite();
                    BatchTableCommit commit = builder.newCommit()) {
                write.withIOManager(IO_MANAGER);
                for (InternalRow row : rows) {
                    write.write(row);
                }
                commit.commit(write.prepareCommit());
            }
        }
        return latest(table);
    }

    /** A dynamic-bucket table needs the bucket of each row from the table's hash index (as Flink's
     * bucket assigner does); the writer then maintains the index. */
    private static void writeDynamicBucket(FileStoreTable table, List<InternalRow> rows) throws Exception {
        String commitUser = UUID.randomUUID().toString();
        HashBucketAssigner assigner = new HashBucketAssigner(
                table.snapshotManager(), commitUser, table.store().newIndexFileHandler(), 1, 1, 0,
                table.coreOptions().dynamicBucketTargetRowNum());
        RowPartitionKeyExtractor keys = new RowPartitionKeyExtractor(table.schema());
        try (TableWriteImpl<?> write = table.newWrite(commitUser);
                TableCommitImpl commit = table.newCommit(commitUser)) {
            write.withIOManager(IO_MANAGER);
            for (InternalRow row : rows) {
                BinaryRow partition = keys.partition(row);
                int bucket = assigner.assign(partition, keys.trimmedPrimaryKey(row).hashCode());
                write.write(row, bucket);
            }
            commit.commit(write.prepareCommit(true, BatchWriteBuilder.COMMIT_IDENTIFIER));
        }
    }

    /** Paimon's own compaction of every (partition, bucket) of the latest snapshot, full when "full". */
    private static JsonNode compact(JsonNode request) throws Exception {
        FileStoreTable table = table(request);
        boolean full = !request.has("full") || request.get("full").asBoolean();
        Set<List<Object>> targets = new LinkedHashSet<>();
        for (Split split : table.newReadBuilder().newScan().plan().splits()) {
            DataSplit data = (DataSplit) split;
            List<Object> target = new ArrayList<>();
            target.add(data.partition());
            target.add(data.bucket());
            targets.add(target);
        }
        BatchWriteBuilder builder = table.newBatchWriteBuilder();
        try (TableWriteImpl<?> write = (TableWriteImpl<?>) builder.newWrite();
                BatchTableCommit commit = builder.newCommit()) {
            write.withIOManager(IO_MANAGER);
            for (List<Object> target : targets) {
                write.compact((BinaryRow) target.get(0), (Integer) target.get(1), full);
            }
            List<CommitMessage> messages = write.prepareCommit();
            commit.commit(messages);
        }
        return latest(table);
    }

    /**
     * Paimon's batch compaction of the whole table as its compact procedure runs it (the benchmark's
     * Java peer), on "threads" threads as the procedure's tasks would run: a bucketed table's
     * (partition, bucket) pairs are dealt to the threads, each with its own write of the same batch
     * write builder calling compact(partition, bucket, full); an unaware-bucket append table (whose
     * writes never compact: their compact manager is a no-op) gets its tasks from
     * UnawareAppendTableCompactionCoordinator, run by AppendOnlyFileStoreWrite, as the 1.0 procedure
     * does for such tables. One batch commit of every message. Answers the snapshot id and the files
     * the compaction removed and added.
     */
    private static JsonNode compactProcedure(JsonNode request) throws Exception {
        FileStoreTable table = table(request);
        boolean full = !request.has("full") || request.get("full").asBoolean();
        int threads = request.hasNonNull("threads") ? Math.max(request.get("threads").asInt(), 1) : 1;
        BatchWriteBuilder builder = table.newBatchWriteBuilder();
        List<java.util.concurrent.Callable<List<CommitMessage>>> work = new ArrayList<>();
        int units;
        if (table.bucketMode() == BucketMode.BUCKET_UNAWARE) {
            List<org.apache.paimon.append.UnawareAppendCompactionTask> tasks =
                    new org.apache.paimon.append.UnawareAppendTableCompactionCoordinator(table, false).run();
            units = tasks.size();
            for (int t = 0; t < threads; t++) {
                List<org.apache.paimon.append.UnawareAppendCompactionTask> mine = dealt(tasks, t, threads);
                work.add(() -> {
                    List<CommitMessage> messages = new ArrayList<>();
                    org.apache.paimon.operation.AppendOnlyFileStoreWrite write =
                            (org.apache.paimon.operation.AppendOnlyFileStoreWrite)
                                    table.store().newWrite(UUID.randomUUID().toString());
                    try {
                        for (org.apache.paimon.append.UnawareAppendCompactionTask task : mine) {
                            messages.add(task.doCompact(table, write));
                        }
                    } finally {
                        write.close();
                    }
                    return messages;
                });
            }
        } else {
            Set<List<Object>> targets = new LinkedHashSet<>();
            for (Split split : table.newReadBuilder().newScan().plan().splits()) {
                DataSplit data = (DataSplit) split;
                List<Object> target = new ArrayList<>();
                target.add(data.partition());
                target.add(data.bucket());
                targets.add(target);
            }
            List<List<Object>> all = new ArrayList<>(targets);
            units = all.size();
            for (int t = 0; t < threads; t++) {
                List<List<Object>> mine = dealt(all, t, threads);
                work.add(() -> {
                    try (TableWriteImpl<?> write = (TableWriteImpl<?>) builder.newWrite()) {
                        write.withIOManager(IO_MANAGER);
                        for (List<Object> target : mine) {
                            write.compact((BinaryRow) target.get(0), (Integer) target.get(1), full);
                        }
                        return write.prepareCommit(true, BatchWriteBuilder.COMMIT_IDENTIFIER);
                    }
                });
            }
        }
        List<CommitMessage> messages = new ArrayList<>();
        java.util.concurrent.ExecutorService pool = java.util.concurrent.Executors.newFixedThreadPool(threads);
        try {
            for (java.util.concurrent.Future<List<CommitMessage>> done : pool.invokeAll(work)) {
                messages.addAll(done.get());
            }
        } finally {
            pool.shutdownNow();
        }
        long removed = 0;
        long added = 0;
        for (CommitMessage message : messages) {
            org.apache.paimon.io.CompactIncrement increment =
                    ((org.apache.paimon.table.sink.CommitMessageImpl) message).compactIncrement();
            removed += increment.compactBefore().size();
            added += increment.compactAfter().size();
        }
        try (BatchTableCommit commit = builder.newCommit()) {
            commit.commit(messages);
        }
        ObjectNode out = NODES.objectNode();
        out.set("snapshot_id", latest(table));
        out.put("units", units);
        out.put("files_removed", removed);
        out.put("files_added", added);
        return out;
    }

    /** Every threads-th item from the t-th: one thread's share of the work. */
    private static <T> List<T> dealt(List<T> items, int t, int threads) {
        List<T> mine = new ArrayList<>();
        for (int i = t; i < items.size(); i += threads) {
            mine.add(items.get(i));
        }
        return mine;
    }

    /**
     * A batch read of the latest snapshot that ships no rows: the row count, and per column of
     * "sum_columns" the sum of its values (integers as they are, floating point in hundredths,
     * rounded), so a benchmark can check millions of rows without sending them over the pipe.
     */
    private static JsonNode countRows(JsonNode request) throws Exception {
        FileStoreTable table = table(request);
        RowType rowType = table.rowType();
        List<String> columns = strings(request.get("sum_columns"));
        int[] positions = new int[columns.size()];
        org.apache.paimon.types.DataTypeRoot[] roots = new org.apache.paimon.types.DataTypeRoot[columns.size()];
        for (int i = 0; i < positions.length; i++) {
            positions[i] = rowType.getFieldIndex(columns.get(i));
            roots[i] = rowType.getTypeAt(positions[i]).getTypeRoot();
        }
        long[] sums = new long[positions.length];
        long[] count = new long[1];
        ReadBuilder builder = table.newReadBuilder();
        builder.newRead().createReader(builder.newScan().plan()).forEachRemaining(row -> {
            count[0]++;
            for (int i = 0; i < positions.length; i++) {
                if (row.isNullAt(positions[i])) {
                    continue;
                }
                switch (roots[i]) {
                    case DOUBLE:
                        sums[i] += Math.round(row.getDouble(positions[i]) * 100);
                        break;
                    case INTEGER:
                        sums[i] += row.getInt(positions[i]);
                        break;
                    case BIGINT:
                        sums[i] += row.getLong(positions[i]);
                        break;
                    default:
                        throw new IllegalArgumentException("cannot sum " + columns.get(i) + " of " + roots[i]);
                }
            }
        });
        ObjectNode out = NODES.objectNode();
        out.put("rows", count[0]);
        ObjectNode sumsOut = out.putObject("sums");
        for (int i = 0; i < positions.length; i++) {
            sumsOut.put(columns.get(i), sums[i]);
        }
        return out;
    }

    /**
     * The index on the Hilbert curve Paimon's HilbertIndexer uses (the davidmoten curve of the
     * bundle) for each point of "points" at "bits" bits per dimension, as decimal strings.
     */
    private static JsonNode hilbertIndex(JsonNode request) {
        int bits = request.get("bits").asInt();
        ArrayNode out = NODES.arrayNode();
        for (JsonNode point : request.get("points")) {
            long[] values = new long[point.size()];
            for (int i = 0; i < values.length; i++) {
                values[i] = point.get(i).asLong();
            }
            out.add(org.apache.paimon.shade.org.davidmoten.hilbert.HilbertCurve.bits(bits)
                    .dimensions(values.length).index(values).toString());
        }
        return out;
    }

    /** Paimon's partition drop (what truncatePartitions does): one OVERWRITE commit of DELETE entries. */
    private static JsonNode dropPartitions(JsonNode request) throws Exception {
        FileStoreTable table = table(request);
        List<Map<String, String>> specs = new ArrayList<>();
        for (JsonNode spec : request.get("partitions")) {
            Map<String, String> values = new LinkedHashMap<>();
            spec.fields().forEachRemaining(e -> values.put(e.getKey(), e.getValue().asText()));
            specs.add(values);
        }
        try (FileStoreCommit commit = table.store().newCommit(UUID.randomUUID().toString())) {
            commit.dropPartitions(specs, BatchWriteBuilder.COMMIT_IDENTIFIER);
        }
        return latest(table);
    }

    /**
     * Paimon's manifest full compaction: an empty commit (not ignored) whose manifest merge runs with
     * manifest.full-compaction-threshold-size 1 b, so every manifest below the target size is rewritten.
     */
    private static JsonNode compactManifests(JsonNode request) throws Exception {
        Map<String, String> full = new HashMap<>();
        full.put("manifest.full-compaction-threshold-size", "1 b");
        FileStoreTable table = table(request).copy(full);
        try (FileStoreCommit commit =
                table.store().newCommit(UUID.randomUUID().toString()).ignoreEmptyCommit(false)) {
            commit.commit(new ManifestCommittable(BatchWriteBuilder.COMMIT_IDENTIFIER), new HashMap<>());
        }
        return latest(table);
    }

    // ----------------------------------------------------------------------------------------------
    // Commit races (tests/java/commit_race.py)
    // ----------------------------------------------------------------------------------------------

    /**
     * One batch commit of an append table that starts at a rendezvous, for the commit-race tests. The
     * rows are written to data files first; then the JVM opens the FIFO "barrier" for reading (which
     * blocks until the test opens it for writing) and reads it to its end, and only then commits: the
     * commit reads the latest snapshot and claims the next id as Paimon always does. The table's file
     * system is Paimon's LocalFileIO, wrapped only to count the snapshot claims its rename refused (a
     * lost race, retried by Paimon at the next id). With "window": [in, go] (two FIFOs, no barrier)
     * the claim of a snapshot file instead pauses between its exists() check and its move, as a thread
     * stalled there would: it opens "in" for writing (the test then knows Java is inside the window)
     * and waits for "go" to be written before moving. With "claim": [ready, go] (no barrier) the
     * first snapshot claim waits at its start: it opens "ready" for writing, waits for "go", pauses a
     * random 0 to "jitter_us" microseconds (so that either side may claim first), then claims as
     * LocalFileIO does. Answers {"snapshot_id", "commit_user", "lost_claims"}.
     */
    private static JsonNode raceWrite(JsonNode request) throws Exception {
        RaceFileIO io = new RaceFileIO(
                request.hasNonNull("window") ? request.get("window") : null,
                request.hasNonNull("claim") ? request.get("claim") : null,
                request.hasNonNull("jitter_us") ? request.get("jitter_us").asLong() : 0L);
        FileStoreTable table = FileStoreTableFactory.create(io, new Path(request.get("path").asText()));
        RowType rowType = table.rowType();
        String commitUser = UUID.randomUUID().toString();
        try (TableWriteImpl<?> write = table.newWrite(commitUser);
                TableCommitImpl commit = table.newCommit(commitUser)) {
            write.withIOManager(IO_MANAGER);
            for (JsonNode row : request.get("rows")) {
                write.write(toRow(row, rowType));
            }
            List<CommitMessage> messages = write.prepareCommit(true, BatchWriteBuilder.COMMIT_IDENTIFIER);
            if (request.hasNonNull("barrier")) {
                awaitFifo(request.get("barrier").asText());
            }
            commit.commit(messages);
        }
        Long id = table.snapshotManager().latestSnapshotId();
        while (id != null && id > 0 && !commitUser.equals(table.snapshotManager().snapshot(id).commitUser())) {
            id--;
        }
        ObjectNode result = NODES.objectNode();
        result.put("snapshot_id", id);
        result.put("commit_user", commitUser);
        result.put("lost_claims", io.lostClaims);
        return result;
    }

    /** Blocks until a writer opens the FIFO, then reads until that writer closes it. */
    private static void awaitFifo(String fifo) throws java.io.IOException {
        try (java.io.FileInputStream in = new java.io.FileInputStream(fifo)) {
            while (in.read() != -1) {
                // the test writes nothing: closing is the signal
            }
        }
    }

    /** Blocks until a reader opens the FIFO, then closes it (the reader sees the end). */
    private static void signalFifo(String fifo) throws java.io.IOException {
        new java.io.FileOutputStream(fifo).close();
    }

    /**
     * Paimon's LocalFileIO for the race tests. Without a window every rename is LocalFileIO's own; the
     * snapshot claims it refuses are counted. With a window, a snapshot file's claim is the same
     * check-then-move LocalFileIO does (target exists: refuse; else an atomic move, which replaces a
     * target created since the check), with the pause between the two made explicit.
     */
    private static final class RaceFileIO extends LocalFileIO {
        private final JsonNode window;
        private JsonNode claimStart;
        private final long jitterMicros;
        private int lostClaims;

        RaceFileIO(JsonNode window, JsonNode claimStart, long jitterMicros) {
            this.window = window;
            this.claimStart = claimStart;
            this.jitterMicros = jitterMicros;
        }

        @Override
        public boolean rename(Path src, Path dst) throws java.io.IOException {
            boolean claim = dst.getName().startsWith("snapshot-");
            if (claim && claimStart != null) {
                signalFifo(claimStart.get(0).asText());
                awaitFifo(claimStart.get(1).asText());
                claimStart = null; // only the first claim starts at the rendezvous
                if (jitterMicros > 0) {
                    java.util.concurrent.locks.LockSupport.parkNanos(
                            java.util.concurrent.ThreadLocalRandom.current().nextLong(jitterMicros + 1) * 1000L);
                }
            }
            if (!claim || window == null) {
                boolean moved = super.rename(src, dst);
                if (claim && !moved) {
                    lostClaims++;
                }
                return moved;
            }
            java.io.File target = toFile(dst);
            if (target.exists()) {
                lostClaims++;
                return false;
            }
            signalFifo(window.get(0).asText());
            awaitFifo(window.get(1).asText());
            java.nio.file.Files.move(
                    toFile(src).toPath(), target.toPath(), java.nio.file.StandardCopyOption.ATOMIC_MOVE);
            return true;
        }
    }

    private static JsonNode latest(FileStoreTable table) {
        Long id = table.snapshotManager().latestSnapshotId();
        return id == null ? NODES.nullNode() : NODES.numberNode(id);
    }

    // ----------------------------------------------------------------------------------------------
    // Maintenance
    // ----------------------------------------------------------------------------------------------

    private static ExpireConfig expireConfig(JsonNode request) {
        ExpireConfig.Builder config = ExpireConfig.builder();
        if (request.hasNonNull("retain_min")) {
            config.snapshotRetainMin(request.get("retain_min").asInt());
        }
        if (request.hasNonNull("retain_max")) {
            config.snapshotRetainMax(request.get("retain_max").asInt());
        }
        if (request.hasNonNull("time_retained_ms")) {
            config.snapshotTimeRetain(Duration.ofMillis(request.get("time_retained_ms").asLong()));
        }
        if (request.hasNonNull("max_deletes")) {
            config.snapshotMaxDeletes(request.get("max_deletes").asInt());
        }
        if (request.hasNonNull("changelog_retain_min")) {
            config.changelogRetainMin(request.get("changelog_retain_min").asInt());
        }
        if (request.hasNonNull("changelog_retain_max")) {
            config.changelogRetainMax(request.get("changelog_retain_max").asInt());
        }
        if (request.hasNonNull("changelog_time_retained_ms")) {
            config.changelogTimeRetain(Duration.ofMillis(request.get("changelog_time_retained_ms").asLong()));
        }
        return config.build();
    }

    /** Paimon's OrphanFilesClean: answers the orphans it found (deleted unless "dry_run"). */
    private static JsonNode removeOrphanFiles(JsonNode request) throws Exception {
        boolean dryRun = request.hasNonNull("dry_run") && request.get("dry_run").asBoolean();
        LocalFileIO io = LocalFileIO.create();
        OrphanFilesClean clean = new OrphanFilesClean(table(request))
                .olderThan(request.get("older_than").asText())
                .fileCleaner(path -> {
                    if (!dryRun) {
                        try {
                            io.deleteQuietly(path);
                        } catch (Exception ignored) {
                            // a failed delete shows as a leftover in the test's own listing
                        }
                    }
                });
        ArrayNode found = NODES.arrayNode();
        for (Path path : clean.clean()) {
            found.add(path.toUri().getPath());
        }
        return found;
    }

    // ----------------------------------------------------------------------------------------------
    // Reading
    // ----------------------------------------------------------------------------------------------

    /** Every row of a batch read at a snapshot / tag (default latest) of the table or a branch, with the
     * fields it was read with and each row's kind: {"fields": [DataField JSON], "rows": [[value, ...],
     * ...], "kinds": ["+I", ...]}. Dynamic "options" apply, e.g. incremental-between with
     * incremental-between-scan-mode changelog reads the changelog files of a snapshot range. */
    private static JsonNode read(JsonNode request) throws Exception {
        FileStoreTable table = table(request);
        Map<String, String> travel = new HashMap<>();
        if (request.hasNonNull("snapshot_id")) {
            travel.put("scan.snapshot-id", request.get("snapshot_id").asText());
        }
        if (request.hasNonNull("tag")) {
            travel.put("scan.tag-name", request.get("tag").asText());
        }
        if (!travel.isEmpty()) {
            table = table.copy(travel);
        }
        RowType rowType = table.rowType();
        ReadBuilder builder = table.newReadBuilder();
        ArrayNode rows = NODES.arrayNode();
        ArrayNode kinds = NODES.arrayNode();
        builder.newRead().createReader(builder.newScan().plan()).forEachRemaining(row -> {
            rows.add(toJson(row, rowType));
            kinds.add(row.getRowKind().shortString());
        });
        ObjectNode result = NODES.objectNode();
        result.set("kinds", kinds);
        ArrayNode fields = NODES.arrayNode();
        for (DataField field : rowType.getFields()) {
            fields.add(JSON.valueToTree(JSON.readTree(org.apache.paimon.utils.JsonSerdeUtil.toJson(field))));
        }
        result.set("fields", fields);
        result.set("rows", rows);
        return result;
    }

    /** The rows of system table "name" (snapshots, files, partitions, tags, branches, ...) of the table or
     * a branch, as the bundle's SystemTableLoader builds it over the table (what `db.t$name` reads
     * through a catalog), at the latest snapshot or "snapshot_id" / "tag": {"fields", "rows"}. */
    private static JsonNode readSystemTable(JsonNode request) throws Exception {
        FileStoreTable data = table(request);
        Map<String, String> travel = new HashMap<>();
        if (request.hasNonNull("snapshot_id")) {
            travel.put("scan.snapshot-id", request.get("snapshot_id").asText());
        }
        if (request.hasNonNull("tag")) {
            travel.put("scan.tag-name", request.get("tag").asText());
        }
        if (!travel.isEmpty()) {
            data = data.copy(travel);
        }
        String name = request.get("name").asText();
        org.apache.paimon.table.Table system = org.apache.paimon.table.system.SystemTableLoader.load(name, data);
        if (system == null) {
            throw new IllegalArgumentException("no system table " + name);
        }
        RowType rowType = system.rowType();
        ReadBuilder builder = system.newReadBuilder();
        ArrayNode rows = NODES.arrayNode();
        builder.newRead().createReader(builder.newScan().plan()).forEachRemaining(row -> rows.add(toJson(row, rowType)));
        ObjectNode result = NODES.objectNode();
        ArrayNode fields = NODES.arrayNode();
        for (DataField field : rowType.getFields()) {
            fields.add(JSON.readTree(org.apache.paimon.utils.JsonSerdeUtil.toJson(field)));
        }
        result.set("fields", fields);
        result.set("rows", rows);
        return result;
    }

    /** The changelog after snapshot "after" up to the latest, as a streaming consumer reads it: a
     * stream scan from snapshot after + 1, planned until it finds no newer snapshot ({"fields", "rows",
     * "kinds"}). Not a batch `incremental-between` read: batch scans of tables that skip level 0
     * (deletion vectors, first-row) skip the level-0 changelog files too. A stream scan skips the
     * snapshots without changelog (COMPACT) inside one plan, so it has no end bound but the latest. */
    private static JsonNode readChangelog(JsonNode request) throws Exception {
        long after = request.get("after").asLong();
        Map<String, String> from = new HashMap<>();
        from.put("scan.mode", "from-snapshot");
        from.put("scan.snapshot-id", String.valueOf(after + 1));
        FileStoreTable table = table(request).copy(from);
        RowType rowType = table.rowType();
        ReadBuilder builder = table.newReadBuilder();
        org.apache.paimon.table.source.StreamTableScan scan = builder.newStreamScan();
        org.apache.paimon.table.source.TableRead read = builder.newRead();
        ArrayNode rows = NODES.arrayNode();
        ArrayNode kinds = NODES.arrayNode();
        for (int round = 0; round < 10_000; round++) {
            Long next = scan.checkpoint();
            read.createReader(scan.plan()).forEachRemaining(row -> {
                rows.add(toJson(row, rowType));
                kinds.add(row.getRowKind().shortString());
            });
            if (next != null && next.equals(scan.checkpoint())) {
                break; // no snapshot after `next`: the latest was read
            }
        }
        ObjectNode result = NODES.objectNode();
        ArrayNode fields = NODES.arrayNode();
        for (DataField field : rowType.getFields()) {
            fields.add(JSON.readTree(org.apache.paimon.utils.JsonSerdeUtil.toJson(field)));
        }
        result.set("fields", fields);
        result.set("rows", rows);
        result.set("kinds", kinds);
        return result;
    }

    /** A streaming reader with `consumer-id`: resumes where its consumer file says (from the start when
     * there is none), reads up to the latest snapshot and checkpoints, which writes the consumer's next
     * snapshot as Flink's source does ({"rows": n, "next": next snapshot}). A resumed snapshot that was
     * expired meanwhile fails as in Flink ("... has expired"). */
    private static JsonNode streamConsumer(JsonNode request) throws Exception {
        Map<String, String> options = new HashMap<>();
        options.put("consumer-id", request.get("consumer_id").asText());
        FileStoreTable table = table(request).copy(options);
        ReadBuilder builder = table.newReadBuilder();
        org.apache.paimon.table.source.StreamTableScan scan = builder.newStreamScan();
        org.apache.paimon.table.source.TableRead read = builder.newRead();
        long[] count = {0};
        Long next = null;
        for (int round = 0; round < 10_000; round++) {
            read.createReader(scan.plan()).forEachRemaining(row -> count[0]++);
            Long now = scan.checkpoint();
            if (now != null && now.equals(next)) {
                break; // no snapshot after `next`: the latest was read
            }
            next = now;
        }
        scan.notifyCheckpointComplete(next);
        ObjectNode result = NODES.objectNode();
        result.put("rows", count[0]);
        if (next != null) {
            result.put("next", next);
        }
        return result;
    }

    private static org.apache.paimon.consumer.ConsumerManager consumers(JsonNode request) {
        FileStoreTable table = table(request);
        String branch = request.hasNonNull("branch") ? request.get("branch").asText() : "main";
        return new org.apache.paimon.consumer.ConsumerManager(table.fileIO(), table.location(), branch);
    }

    /** Paimon's reset_consumer procedure (ResetConsumerAction): with "next_snapshot" the snapshot must
     * exist and the consumer is (re)written; without, the consumer is deleted. */
    private static JsonNode resetConsumer(JsonNode request) {
        org.apache.paimon.consumer.ConsumerManager consumers = consumers(request);
        String id = request.get("consumer_id").asText();
        if (request.hasNonNull("next_snapshot")) {
            long next = request.get("next_snapshot").asLong();
            table(request).snapshotManager().snapshot(next);
            consumers.resetConsumer(id, new org.apache.paimon.consumer.Consumer(next));
        } else {
            consumers.deleteConsumer(id);
        }
        return NODES.nullNode();
    }

    /** Paimon's clear_consumers (ConsumerManager.clearConsumers of later versions: the ids that fully
     * match "include" and not "exclude" are deleted), built from the 1.0 bundle's listAllIds and
     * deleteConsumer, which has no clearConsumers. The deleted ids. */
    private static JsonNode clearConsumers(JsonNode request) {
        org.apache.paimon.consumer.ConsumerManager consumers = consumers(request);
        java.util.regex.Pattern include = java.util.regex.Pattern.compile(request.get("include").asText());
        java.util.regex.Pattern exclude =
                request.hasNonNull("exclude") ? java.util.regex.Pattern.compile(request.get("exclude").asText()) : null;
        ArrayNode deleted = NODES.arrayNode();
        for (String id : consumers.listAllIds()) {
            if (include.matcher(id).matches() && (exclude == null || !exclude.matcher(id).matches())) {
                consumers.deleteConsumer(id);
                deleted.add(id);
            }
        }
        return deleted;
    }

    /** Paimon's success-file mark-done action (SuccessFileMarkDoneAction) on "partitions" (paths such as
     * "dt=a") when given, then what Paimon reads back from every "read" partition's _SUCCESS file:
     * {partition: {"creationTime", "modificationTime"} or null}. */
    private static JsonNode markPartitionDone(JsonNode request) throws Exception {
        FileStoreTable table = table(request);
        org.apache.paimon.partition.actions.SuccessFileMarkDoneAction action =
                new org.apache.paimon.partition.actions.SuccessFileMarkDoneAction(table.fileIO(), table.location());
        for (JsonNode partition : request.path("partitions")) {
            action.markDone(partition.asText());
        }
        ObjectNode result = NODES.objectNode();
        for (JsonNode partition : request.path("read")) {
            org.apache.paimon.fs.Path file = new org.apache.paimon.fs.Path(
                    new org.apache.paimon.fs.Path(table.location(), partition.asText()), "_SUCCESS");
            org.apache.paimon.partition.file.SuccessFile success =
                    org.apache.paimon.partition.file.SuccessFile.safelyFromPath(table.fileIO(), file);
            if (success == null) {
                result.putNull(partition.asText());
            } else {
                ObjectNode times = result.putObject(partition.asText());
                times.put("creationTime", success.creationTime());
                times.put("modificationTime", success.modificationTime());
            }
        }
        return result;
    }

    /** The snapshots Paimon's time-travel procedures pick for "time_ms" (and "watermark"): rollback_to_*
     * takes earlierOrEqual (the latest at or before), create_tag_from_* laterOrEqual (the earliest at or
     * after). {"earlier_or_equal_time": id, "later_or_equal_time": id, "later_or_equal_watermark": id};
     * absent when there is none. This bundle has no earlierOrEqualWatermark. */
    private static JsonNode snapshotsAround(JsonNode request) {
        org.apache.paimon.utils.SnapshotManager snapshots = table(request).snapshotManager();
        ObjectNode result = NODES.objectNode();
        long time = request.get("time_ms").asLong();
        org.apache.paimon.Snapshot earlier = snapshots.earlierOrEqualTimeMills(time);
        org.apache.paimon.Snapshot later = snapshots.laterOrEqualTimeMills(time);
        if (earlier != null) {
            result.put("earlier_or_equal_time", earlier.id());
        }
        if (later != null) {
            result.put("later_or_equal_time", later.id());
        }
        if (request.hasNonNull("watermark")) {
            org.apache.paimon.Snapshot byWatermark = snapshots.laterOrEqualWatermark(request.get("watermark").asLong());
            if (byWatermark != null) {
                result.put("later_or_equal_watermark", byWatermark.id());
            }
        }
        return result;
    }

    // ----------------------------------------------------------------------------------------------
    // Typed JSON <-> Paimon internal values
    // ----------------------------------------------------------------------------------------------

    private static InternalRow toRow(JsonNode row, RowType rowType) {
        GenericRow out = new GenericRow(rowType.getFieldCount());
        for (int i = 0; i < rowType.getFieldCount(); i++) {
            DataField field = rowType.getFields().get(i);
            JsonNode value = row.isArray() ? row.get(i) : row.get(field.name());
            out.setField(i, toJava(value, field.type()));
        }
        if (row.isObject() && row.hasNonNull("_kind")) {
            out.setRowKind(RowKind.fromShortString(row.get("_kind").asText()));
        }
        return out;
    }

    private static Object toJava(JsonNode value, DataType type) {
        if (value == null || value.isNull()) {
            return null;
        }
        switch (type.getTypeRoot()) {
            case BOOLEAN:
                return value.asBoolean();
            case TINYINT:
                return (byte) value.asInt();
            case SMALLINT:
                return (short) value.asInt();
            case INTEGER:
                return value.asInt();
            case BIGINT:
                return value.asLong();
            case FLOAT:
                return (float) value.asDouble();
            case DOUBLE:
                return value.asDouble();
            case CHAR:
            case VARCHAR:
                return BinaryString.fromString(value.asText());
            case BINARY:
            case VARBINARY:
                return Base64.getDecoder().decode(value.asText());
            case DECIMAL:
                DecimalType decimal = (DecimalType) type;
                return Decimal.fromBigDecimal(
                        new BigDecimal(value.asText()), decimal.getPrecision(), decimal.getScale());
            case DATE:
                return (int) LocalDate.parse(value.asText()).toEpochDay();
            case TIME_WITHOUT_TIME_ZONE:
                return (int) (LocalTime.parse(value.asText()).toNanoOfDay() / 1_000_000L);
            case TIMESTAMP_WITHOUT_TIME_ZONE:
                return Timestamp.fromLocalDateTime(LocalDateTime.parse(value.asText()));
            case TIMESTAMP_WITH_LOCAL_TIME_ZONE:
                return Timestamp.fromInstant(LocalDateTime.parse(value.asText()).toInstant(ZoneOffset.UTC));
            case ARRAY:
                DataType element = ((ArrayType) type).getElementType();
                Object[] items = new Object[value.size()];
                for (int i = 0; i < value.size(); i++) {
                    items[i] = toJava(value.get(i), element);
                }
                return new GenericArray(items);
            case MAP:
                MapType map = (MapType) type;
                Map<Object, Object> entries = new LinkedHashMap<>();
                if (value.isObject()) {
                    value.fields().forEachRemaining(e -> entries.put(
                            toJava(NODES.textNode(e.getKey()), map.getKeyType()),
                            toJava(e.getValue(), map.getValueType())));
                }
                for (JsonNode pair : value.isArray() ? value : NODES.arrayNode()) {
                    entries.put(toJava(pair.get(0), map.getKeyType()), toJava(pair.get(1), map.getValueType()));
                }
                return new GenericMap(entries);
            case ROW:
                return toRow(value, (RowType) type);
            default:
                throw new IllegalArgumentException("unsupported type " + type);
        }
    }

    private static ArrayNode toJson(InternalRow row, RowType rowType) {
        ArrayNode out = NODES.arrayNode();
        for (int i = 0; i < rowType.getFieldCount(); i++) {
            DataType type = rowType.getTypeAt(i);
            out.add(toJson(InternalRow.createFieldGetter(type, i).getFieldOrNull(row), type));
        }
        return out;
    }

    private static JsonNode toJson(Object value, DataType type) {
        if (value == null) {
            return NODES.nullNode();
        }
        switch (type.getTypeRoot()) {
            case BOOLEAN:
                return NODES.booleanNode((Boolean) value);
            case TINYINT:
                return NODES.numberNode((Byte) value);
            case SMALLINT:
                return NODES.numberNode((Short) value);
            case INTEGER:
                return NODES.numberNode((Integer) value);
            case BIGINT:
                return NODES.numberNode((Long) value);
            case FLOAT:
                return NODES.numberNode((Float) value);
            case DOUBLE:
                return NODES.numberNode((Double) value);
            case CHAR:
            case VARCHAR:
                return NODES.textNode(value.toString());
            case BINARY:
            case VARBINARY:
                return NODES.textNode(Base64.getEncoder().encodeToString((byte[]) value));
            case DECIMAL:
                return NODES.textNode(((Decimal) value).toBigDecimal().toPlainString());
            case DATE:
                return NODES.textNode(LocalDate.ofEpochDay((Integer) value).toString());
            case TIME_WITHOUT_TIME_ZONE:
                return NODES.textNode(LocalTime.ofNanoOfDay((Integer) value * 1_000_000L).toString());
            case TIMESTAMP_WITHOUT_TIME_ZONE:
                return NODES.textNode(((Timestamp) value).toLocalDateTime().toString());
            case TIMESTAMP_WITH_LOCAL_TIME_ZONE:
                Instant instant = ((Timestamp) value).toInstant();
                return NODES.textNode(LocalDateTime.ofInstant(instant, ZoneOffset.UTC).toString());
            case ARRAY:
                DataType element = ((ArrayType) type).getElementType();
                InternalArray array = (InternalArray) value;
                InternalArray.ElementGetter getter = InternalArray.createElementGetter(element);
                ArrayNode items = NODES.arrayNode();
                for (int i = 0; i < array.size(); i++) {
                    items.add(toJson(getter.getElementOrNull(array, i), element));
                }
                return items;
            case MAP:
                MapType mapType = (MapType) type;
                InternalMap map = (InternalMap) value;
                InternalArray.ElementGetter keyGetter = InternalArray.createElementGetter(mapType.getKeyType());
                InternalArray.ElementGetter valueGetter =
                        InternalArray.createElementGetter(mapType.getValueType());
                ArrayNode pairs = NODES.arrayNode();
                for (int i = 0; i < map.size(); i++) {
                    ArrayNode pair = NODES.arrayNode();
                    pair.add(toJson(keyGetter.getElementOrNull(map.keyArray(), i), mapType.getKeyType()));
                    pair.add(toJson(valueGetter.getElementOrNull(map.valueArray(), i), mapType.getValueType()));
                    pairs.add(pair);
                }
                return pairs;
            case ROW:
                return toJson((InternalRow) value, (RowType) type);
            default:
                throw new IllegalArgumentException("unsupported type " + type);
        }
    }
}
