package ccbench.ycsb;

import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import java.util.Vector;

import org.rocksdb.BlockBasedTableConfig;
import org.rocksdb.LRUCache;
import org.rocksdb.Options;
import org.rocksdb.RocksDB;
import org.rocksdb.RocksDBException;
import org.rocksdb.RocksIterator;
import org.rocksdb.WriteOptions;

import site.ycsb.ByteArrayByteIterator;
import site.ycsb.ByteIterator;
import site.ycsb.DB;
import site.ycsb.DBException;
import site.ycsb.Status;

/**
 * A YCSB binding for an embedded RocksDB in the directory given by the property {@code rocksdb.dir}.
 * YCSB creates one binding per client thread; they share one database, opened by the first and
 * closed by the last. A record (a map of fields) is stored under its key as
 * [field count][name length][name][value length][value]...
 *
 * <p>Optional properties: {@code rocksdb.sync} (true: every write waits for the write-ahead log to
 * reach the storage with fsync, as a database that commits durably does), {@code rocksdb.write_buffer_mb}
 * (memtable size; smaller means more flushes and compactions on the storage) and
 * {@code rocksdb.block_cache_mb} (RocksDB's own read cache).
 */
public class RocksDbBinding extends DB {
  private static final Object LOCK = new Object();
  private static RocksDB database;
  private static Options options;
  private static WriteOptions writeOptions;
  private static LRUCache blockCache;
  private static int references;

  @Override
  public void init() throws DBException {
    String directory = getProperties().getProperty("rocksdb.dir");
    if (directory == null) {
      throw new DBException("set the property rocksdb.dir to the database directory");
    }
    synchronized (LOCK) {
      if (database == null) {
        RocksDB.loadLibrary();
        options = new Options().setCreateIfMissing(true);
        String writeBuffer = getProperties().getProperty("rocksdb.write_buffer_mb");
        if (writeBuffer != null) {
          options.setWriteBufferSize(Long.parseLong(writeBuffer) * 1024 * 1024);
        }
        String cache = getProperties().getProperty("rocksdb.block_cache_mb");
        if (cache != null) {
          blockCache = new LRUCache(Long.parseLong(cache) * 1024 * 1024);
          options.setTableFormatConfig(new BlockBasedTableConfig().setBlockCache(blockCache));
        }
        writeOptions = new WriteOptions().setSync(Boolean.parseBoolean(getProperties().getProperty("rocksdb.sync", "false")));
        try {
          database = RocksDB.open(options, directory);
        } catch (RocksDBException e) {
          throw new DBException("cannot open RocksDB in " + directory + ": " + e.getMessage(), e);
        }
      }
      references++;
    }
  }

  @Override
  public void cleanup() throws DBException {
    synchronized (LOCK) {
      references--;
      if (references == 0 && database != null) {
        database.close();
        options.close();
        writeOptions.close();
        if (blockCache != null) {
          blockCache.close();
          blockCache = null;
        }
        database = null;
      }
    }
  }

  private static byte[] key(String table, String key) {
    return (table + ":" + key).getBytes(StandardCharsets.UTF_8);
  }

  static byte[] serialize(Map<String, ByteIterator> values) throws IOException {
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    DataOutputStream out = new DataOutputStream(bytes);
    out.writeInt(values.size());
    for (Map.Entry<String, ByteIterator> entry : values.entrySet()) {
      byte[] name = entry.getKey().getBytes(StandardCharsets.UTF_8);
      byte[] value = entry.getValue().toArray();
      out.writeInt(name.length);
      out.write(name);
      out.writeInt(value.length);
      out.write(value);
    }
    out.flush();
    return bytes.toByteArray();
  }

  static Map<String, ByteIterator> deserialize(byte[] data, Set<String> fields, Map<String, ByteIterator> into)
      throws IOException {
    DataInputStream in = new DataInputStream(new ByteArrayInputStream(data));
    int count = in.readInt();
    for (int i = 0; i < count; i++) {
      byte[] name = new byte[in.readInt()];
      in.readFully(name);
      byte[] value = new byte[in.readInt()];
      in.readFully(value);
      String field = new String(name, StandardCharsets.UTF_8);
      if (fields == null || fields.contains(field)) {
        into.put(field, new ByteArrayByteIterator(value));
      }
    }
    return into;
  }

  @Override
  public Status read(String table, String key, Set<String> fields, Map<String, ByteIterator> result) {
    try {
      byte[] data = database.get(key(table, key));
      if (data == null) {
        return Status.NOT_FOUND;
      }
      deserialize(data, fields, result);
      return Status.OK;
    } catch (RocksDBException | IOException e) {
      return Status.ERROR;
    }
  }

  @Override
  public Status scan(String table, String startkey, int recordcount, Set<String> fields,
                     Vector<HashMap<String, ByteIterator>> result) {
    byte[] prefix = (table + ":").getBytes(StandardCharsets.UTF_8);
    try (RocksIterator iterator = database.newIterator()) {
      iterator.seek(key(table, startkey));
      for (int i = 0; i < recordcount && iterator.isValid(); i++, iterator.next()) {
        byte[] found = iterator.key();
        if (found.length < prefix.length || !new String(found, 0, prefix.length, StandardCharsets.UTF_8).equals(table + ":")) {
          break;
        }
        result.add((HashMap<String, ByteIterator>) deserialize(iterator.value(), fields, new HashMap<>()));
      }
      return Status.OK;
    } catch (IOException e) {
      return Status.ERROR;
    }
  }

  @Override
  public Status update(String table, String key, Map<String, ByteIterator> values) {
    try {
      Map<String, ByteIterator> record = new HashMap<>();
      byte[] existing = database.get(key(table, key));
      if (existing == null) {
        return Status.NOT_FOUND;
      }
      deserialize(existing, null, record);
      record.putAll(values);
      database.put(writeOptions, key(table, key), serialize(record));
      return Status.OK;
    } catch (RocksDBException | IOException e) {
      return Status.ERROR;
    }
  }

  @Override
  public Status insert(String table, String key, Map<String, ByteIterator> values) {
    try {
      database.put(writeOptions, key(table, key), serialize(values));
      return Status.OK;
    } catch (RocksDBException | IOException e) {
      return Status.ERROR;
    }
  }

  @Override
  public Status delete(String table, String key) {
    try {
      database.delete(writeOptions, key(table, key));
      return Status.OK;
    } catch (RocksDBException e) {
      return Status.ERROR;
    }
  }
}
