#!/usr/bin/env bash
# the real YCSB (site.ycsb:core 0.17.0) with ccbench's RocksDB binding, built with Maven
command -v java >/dev/null || apt_install default-jdk-headless
command -v mvn >/dev/null || apt_install maven
need_checkout java/ycsb-rocksdb "the YCSB RocksDB binding"
YCSB_DIR="$ROOT/java/ycsb-rocksdb"
YCSB_JAR="$YCSB_DIR/target/ycsb-rocksdb-0.1.0.jar"
if [ ! -f "$YCSB_JAR" ] || [ ! -d "$YCSB_DIR/target/lib" ] \
   || [ -n "$(find "$YCSB_DIR/src" "$YCSB_DIR/pom.xml" -newer "$YCSB_JAR" 2>/dev/null)" ]; then
  log "building the YCSB RocksDB binding (Maven; dependencies cached in ~/.m2)"
  # offline first: a rebuild needs nothing new once ~/.m2 holds YCSB, RocksDB and the plugins
  (cd "$YCSB_DIR" && { mvn -q -o -B package -DskipTests >/dev/null 2>&1 || mvn -q -B package -DskipTests; }) \
    || die "the YCSB binding did not build (see the Maven output above)"
fi
